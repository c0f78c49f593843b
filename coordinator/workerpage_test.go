package coordinator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
	"codeberg.org/snowflaked/snowflaked/internal/zkconn"
	"codeberg.org/snowflaked/snowflaked/internal/zkconn/zkmem"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// addForeverNodes writes n forever znodes of stopped nodes ("peerNNNN",
// worker IDs from first) straight into srv's cluster, as n nodes that ran
// and stopped long ago would have left them.
func addForeverNodes(t *testing.T, srv *zkmem.Server, cluster string, first, n int) {
	t.Helper()
	conn := srv.Connect(zkconn.Options{})
	t.Cleanup(conn.Close)
	long := time.Now().Add(-time.Hour).UnixMilli()
	for i := range n {
		key := fmt.Sprintf("peer%04d", i)
		p := fmt.Sprintf("/snowflaked/%s/forever/%s-%010d", cluster, key, 5000+i)
		data := fmt.Sprintf(`{"worker_id":%d,"node_key":%q,"addr":"127.0.0.1:1","last_ts":%d,"fence":%d,"updated":%d,"stopped":true}`,
			first+i, key, long, long, long)
		if _, err := conn.Create(p, []byte(data), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatalf("create %s: %v", p, err)
		}
	}
}

// countReads counts srv's requests while f runs (nothing else uses srv).
func countReads(srv *zkmem.Server, f func()) int64 {
	before := srv.Requests()
	f()
	return srv.Requests() - before
}

// One page of the worker table costs a number of ZooKeeper requests
// bounded by its limit, not by the cluster's size, over the coordinator's
// own session (no session opened); the node's own row is always on it, and
// Total counts every forever znode.
func TestListWorkerPageIsBounded(t *testing.T) {
	srv := zkmem.New()
	cfg := testConfig(t, []string{"127.0.0.1:2181"}, "self")
	cfg.Dial = srv.Dial
	c := newCoord(t, cfg)
	id := mustClaim(t, c)
	const peers = 200
	addForeverNodes(t, srv, cfg.Cluster, 100, peers)
	var full []WorkerInfo
	var err error
	reads := countReads(srv, func() {
		full, err = testAdmin(t, cfg.Servers, "", 5*time.Second, WithAdminDial(srv.Dial)).ListWorkers(context.Background(), cfg.Cluster)
	})
	t.Logf("ListWorkers (a session of its own): %d ZooKeeper requests for %d nodes", reads, len(full))
	if err != nil || len(full) != peers+1 {
		t.Fatalf("ListWorkers: %d rows, %v; want %d", len(full), err, peers+1)
	}
	tests := []struct {
		limit    int
		wantRows int
	}{
		{1, 1},
		{10, 10},
		{100, 100},
		{MaxWorkerPageLimit, peers + 1},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint("limit ", tc.limit), func(t *testing.T) {
			sessions := srv.SessionsOpened()
			var pg WorkerPage
			reads := countReads(srv, func() {
				pg, err = c.ListWorkerPage(context.Background(), tc.limit)
			})
			if err != nil {
				t.Fatalf("ListWorkerPage: %v", err)
			}
			t.Logf("limit %d: %d ZooKeeper requests for %d of %d nodes", tc.limit, reads, len(pg.Workers), pg.Total)
			if bound := int64(2*min(tc.limit, peers+1) + 4); reads > bound {
				t.Errorf("%d ZooKeeper requests for a page of %d, want at most %d", reads, tc.limit, bound)
			}
			if n := srv.SessionsOpened() - sessions; n != 0 {
				t.Errorf("a page opened %d ZooKeeper sessions, want none", n)
			}
			if len(pg.Workers) != tc.wantRows || pg.Total != peers+1 || pg.Limit != tc.limit {
				t.Errorf("%d rows, total %d, limit %d; want %d, %d, %d", len(pg.Workers), pg.Total, pg.Limit, tc.wantRows, peers+1, tc.limit)
			}
			var own *WorkerInfo
			for i, w := range pg.Workers {
				if w.NodeKey == "self" {
					own = &pg.Workers[i]
				}
				if w.Problem != "" {
					t.Errorf("row %+v has a problem", w)
				}
			}
			if own == nil || own.WorkerID != id.WorkerID || !own.LeaseHeld || own.LeaseHolder != "" {
				t.Errorf("own row %+v, want worker %d with its lease", own, id.WorkerID)
			}
		})
	}
}

// A bad limit is refused before any request; without a session the page
// fails at once with ErrZKUnavailable instead of queueing its reads.
func TestListWorkerPageRefuses(t *testing.T) {
	srv := zkmem.New()
	cfg := testConfig(t, []string{"127.0.0.1:2181"}, "self")
	cfg.Dial = srv.Dial
	c := newCoord(t, cfg)
	for _, limit := range []int{0, -1, MaxWorkerPageLimit + 1} {
		if _, err := c.ListWorkerPage(context.Background(), limit); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("limit %d: %v, want ErrInvalidConfig", limit, err)
		}
	}
	if _, err := c.ListWorkerPage(context.Background(), 10); !errors.Is(err, ErrZKUnavailable) || !strings.Contains(err.Error(), "not connected") {
		t.Errorf("before any session: %v, want ErrZKUnavailable (not connected)", err)
	}
	if c.Connected() {
		t.Error("Connected before any session")
	}
	mustClaim(t, c)
	if !c.Connected() {
		t.Error("not Connected after the claim")
	}
}

// A node whose clock is 10 s behind reports on time: its row's age comes
// from ZooKeeper's time of the write (mtime), not from the report's own
// stepped-back time, and the row says how far its clock is off.
func TestForeverRowAgeFromZooKeepersTime(t *testing.T) {
	now := time.Now().UnixMilli()
	p := newPaths("c")
	for _, tc := range []struct {
		name      string
		lastTS    int64
		mtime     int64
		age, skew int64
		clockNote string
	}{
		{"clock 10s behind", now - 10_500, now - 500, 500, -10_000, "its clock is 10.0s behind ZooKeeper's"},
		{"clock 3s ahead", now + 2_500, now - 500, 0, 3_000, "its clock is 3.0s ahead of ZooKeeper's"},
		{"in step", now - 500, now - 480, 480, -20, ""},
		{"silent for a minute", now - 60_000, now - 60_000, 60_000, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := fmt.Sprintf(`{"worker_id":3,"node_key":"n","addr":"127.0.0.1:1","last_ts":%d,"fence":%d,"updated":%d}`, tc.lastTS, tc.lastTS, tc.lastTS)
			row := foreverRow(p, "n-0000000001", "n", 1, &zkclient.GetResult{Data: []byte(data), Stat: &zk.Stat{Mtime: tc.mtime}}, WorkerRange{Lo: 0, Hi: 1023}, snowflake.UnixMilli(now))
			if row.Problem != "" {
				t.Fatal(row.Problem)
			}
			if row.LastReportAgeMs != tc.age || row.ReportSkewMs != tc.skew || row.ClockNote() != tc.clockNote {
				t.Fatalf("age %d, skew %d, note %q; want %d, %d, %q", row.LastReportAgeMs, row.ReportSkewMs, row.ClockNote(), tc.age, tc.skew, tc.clockNote)
			}
		})
	}
}

// A write to a forever znode that is not the node's own (snowflakectl node
// retire, another node's take-over evicting it, a claim that has not
// reported yet) moves its mtime too: the row must not take it for a fresh
// report, nor the node's clock for an hour behind.
func TestForeverRowOthersWritesAreNoReport(t *testing.T) {
	now := time.Now().UnixMilli()
	hour := int64(3_600_000)
	p := newPaths("c")
	for _, tc := range []struct{ name, data string }{
		{"retired an hour after the last report",
			fmt.Sprintf(`{"worker_id":3,"node_key":"n","addr":"127.0.0.1:1","last_ts":%d,"fence":%d,"updated":%d,"retired":%d}`, now-hour, now-hour, now-hour, now)},
		{"evicted by another node's take-over",
			fmt.Sprintf(`{"worker_id":-1,"prev_worker_id":3,"node_key":"n","addr":"127.0.0.1:1","last_ts":%d,"fence":%d,"updated":%d,"recycled_to":"/x"}`, now-hour, now-hour, now)},
		{"written since its last report",
			fmt.Sprintf(`{"worker_id":3,"node_key":"n","addr":"127.0.0.1:1","last_ts":%d,"fence":%d,"updated":%d}`, now-hour, now+3000, now)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			row := foreverRow(p, "n-0000000001", "n", 1, &zkclient.GetResult{Data: []byte(tc.data), Stat: &zk.Stat{Mtime: now}}, WorkerRange{Lo: 0, Hi: 1023}, snowflake.UnixMilli(now))
			if row.LastReportAgeMs < hour-1000 || row.ClockNote() != "" {
				t.Errorf("last report an hour ago: age %dms, note %q; want about an hour and no clock note", row.LastReportAgeMs, row.ClockNote())
			}
		})
	}
}
