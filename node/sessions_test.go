package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/internal/zkconn"
	"codeberg.org/snowflaked/snowflaked/internal/zkconn/zkmem"
	"codeberg.org/snowflaked/snowflaked/segment"
)

// withDial opens the node's ZooKeeper clients with dial.
func withDial(dial zkconn.Dialer) seam { return func(s *seams) { s.dial = dial } }

const sessCluster = "sess"

// memZKConfig is a ZooKeeper-mode config for an in-memory ZooKeeper, with
// short timings and a cache file in a temp dir.
func memZKConfig(t *testing.T, nodeKey string) Config {
	t.Helper()
	cfg := defaultConfig()
	cfg.ZK, cfg.Cluster, cfg.NodeKey, cfg.CreateCluster = "127.0.0.1:2181", sessCluster, nodeKey, true
	cfg.Listen = "127.0.0.1:0"
	cfg.CacheFile = t.TempDir() + "/cache.json"
	cfg.ZKSessionTimeout, cfg.ReportInterval, cfg.FenceAhead = 2*time.Second, 500*time.Millisecond, time.Second
	cfg.ZKFenceAhead = 6 * time.Second
	cfg.PeerInterval = time.Second
	return cfg
}

// startMemZKNode runs a node on srv (through dial when not nil) and waits
// until it is in service; it returns its address.
func startMemZKNode(t *testing.T, srv *zkmem.Server, dial zkconn.Dialer) string {
	t.Helper()
	if dial == nil {
		dial = srv.Dial
	}
	ln := loopbackListener(t)
	startRunOn(t, memZKConfig(t, "n1"), ln, withDial(dial))
	addr := ln.Addr().String()
	waitHTTP(t, addr, "/readyz", func(code int, _ string) bool { return code == http.StatusOK })
	return addr
}

// createTag creates a segment tag in srv's cluster with a session of its
// own, closed before it returns.
func createTag(t *testing.T, srv *zkmem.Server, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := segment.OpenZK(ctx, segment.ZKConfig{Servers: []string{"127.0.0.1:2181"}, Cluster: sessCluster, Timeout: 2 * time.Second, Dial: srv.Dial})
	if err != nil {
		t.Fatalf("open the segment store: %v", err)
	}
	defer st.Close()
	if err := st.Create(ctx, segment.Tag{Name: name, Start: 1, Step: 100, MaxStep: 1000}); err != nil {
		t.Fatalf("create tag %s: %v", name, err)
	}
}

// checkSessions fails unless srv holds live sessions now and opened
// opened in all.
func checkSessions(t *testing.T, srv *zkmem.Server, when string, live int, opened int64) {
	t.Helper()
	if got, all := srv.LiveSessions(), srv.SessionsOpened(); got != live || all != opened {
		t.Errorf("%s: %d live ZooKeeper sessions, %d opened in all; want %d and %d", when, got, all, live, opened)
	}
}

// A node that serves no segment holds one ZooKeeper session, the
// coordinator's: segment mode opens its own at the first segment request
// (and none for an invalid tag), and /readyz/segment is 200 before it. The
// status page opens none.
func TestNodeZooKeeperSessions(t *testing.T) {
	srv := zkmem.New()
	addr := startMemZKNode(t, srv, nil)
	checkSessions(t, srv, "in service, no segment used", 1, 1)
	if code, body := httpGet(t, addr, "/readyz/segment"); code != http.StatusOK {
		t.Errorf("/readyz/segment before any segment request: %d %s, want 200", code, body)
	}
	if code, body := httpGet(t, addr, "/status"); code != http.StatusOK {
		t.Errorf("/status: %d %s", code, body)
	}
	if code, body := httpGet(t, addr, "/segment/not%20a%20tag"); code != http.StatusBadRequest {
		t.Errorf("/segment of an invalid tag: %d %s, want 400", code, body)
	}
	checkSessions(t, srv, "after /status and an invalid tag", 1, 1)

	createTag(t, srv, "orders")
	checkSessions(t, srv, "after the tag's creation (its own session, closed)", 1, 2)
	code, body := httpGet(t, addr, "/segment/orders?count=3&format=json")
	if code != http.StatusOK {
		t.Fatalf("first /segment/orders: %d %s", code, body)
	}
	checkSessions(t, srv, "after the first segment request", 2, 3)
	if code, body := httpGet(t, addr, "/readyz/segment"); code != http.StatusOK {
		t.Errorf("/readyz/segment once the store is open: %d %s, want 200", code, body)
	}
	for range 3 {
		if code, body := httpGet(t, addr, "/segment/orders"); code != http.StatusOK {
			t.Fatalf("/segment/orders: %d %s", code, body)
		}
	}
	checkSessions(t, srv, "after more segment requests", 2, 3)
}

// When ZooKeeper refuses segment mode's session (e.g. maxClientCnxns), the
// first segment request gets a prompt 503 JSON error saying why, not a
// hung request; the node stays in service and /readyz/segment says 503.
func TestSegmentFirstRequestWithoutZooKeeper(t *testing.T) {
	srv := zkmem.New()
	var dials atomic.Int64
	refused := errors.New("too many connections from 127.0.0.1 (maxClientCnxns)")
	dial := func(servers []string, opt zkconn.Options) (zkconn.Conn, error) {
		if dials.Add(1) > 1 { // the coordinator's is the first
			return nil, refused
		}
		return srv.Dial(servers, opt)
	}
	addr := startMemZKNode(t, srv, dial)
	createTag(t, srv, "orders")
	start := time.Now()
	code, body := httpGet(t, addr, "/segment/orders")
	took := time.Since(start)
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || code != http.StatusServiceUnavailable ||
		e.Error.Code != "segment_unavailable" || !strings.Contains(e.Error.Message, refused.Error()) {
		t.Errorf("first /segment/orders with the session refused: %d %s (%v), want 503 segment_unavailable naming %q", code, body, err, refused)
	}
	if took > segmentOpenWait+time.Second {
		t.Errorf("the refused request took %v, over the %v bound", took, segmentOpenWait)
	}
	if code, body := httpGet(t, addr, "/readyz/segment"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz/segment with the store refused: %d %s, want 503", code, body)
	}
	if code, body := httpGet(t, addr, "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz with segment mode refused: %d %s, want 200", code, body)
	}
}

// A state file segment mode cannot resume keeps segment mode off for good:
// /readyz/segment says 503 from the start (not ready because no tag was
// used yet), and a segment request is answered 503 naming the state file,
// not after waiting for a session that is never opened.
func TestSegmentStateFileUnreadable(t *testing.T) {
	srv := zkmem.New()
	cfg := memZKConfig(t, "n1")
	if err := os.WriteFile(cfg.CacheFile+".segments", []byte("not a state file"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln := loopbackListener(t)
	startRunOn(t, cfg, ln, withDial(srv.Dial))
	addr := ln.Addr().String()
	waitHTTP(t, addr, "/readyz", func(code int, _ string) bool { return code == http.StatusOK })
	if code, body := httpGet(t, addr, "/readyz/segment"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz/segment with an unreadable state file: %d %s, want 503", code, body)
	}
	createTag(t, srv, "orders")
	code, body := httpGet(t, addr, "/segment/orders")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "cannot resume the state file") {
		t.Errorf("/segment/orders with an unreadable state file: %d %s, want 503 naming the state file", code, body)
	}
}

// One /status view reads a number of znodes bounded by its ?limit, not by
// the cluster's size, over the node's own session, and says how many nodes
// there are in all; a bad limit is a 400 naming it.
func TestStatusPageReadsBoundedByLimit(t *testing.T) {
	srv := zkmem.New()
	addr := startMemZKNode(t, srv, nil)
	const peers = 200
	addStoppedPeers(t, srv, peers)
	var reads atomic.Int64 // reads of forever/ and leases/ znodes and lists
	prefix := fmt.Sprintf("/snowflaked/%s/", sessCluster)
	srv.SetInjector(func(r zkmem.Request) zkmem.Fault {
		if (r.Op == "get" || r.Op == "children") &&
			(strings.HasPrefix(r.Path, prefix+"forever") || strings.HasPrefix(r.Path, prefix+"leases")) {
			reads.Add(1)
		}
		return zkmem.Fault{}
	})
	opened := srv.SessionsOpened()
	tests := []struct {
		query    string
		limit    int
		wantRows int
	}{
		{"?limit=10", 10, 10},
		{"", 100, 100},
		{"?limit=1000", 1000, peers + 1},
	}
	for _, tc := range tests {
		t.Run("view"+tc.query, func(t *testing.T) {
			reads.Store(0)
			code, body := httpGet(t, addr, "/status"+tc.query)
			if code != http.StatusOK {
				t.Fatalf("/status%s: %d %s", tc.query, code, body)
			}
			n := reads.Load()
			t.Logf("/status%s: %d reads of forever/ and leases/ for %d nodes", tc.query, n, peers+1)
			// 2 per row at most, the two lists, and a renewal or two of
			// the node's own forever znode meanwhile.
			if bound := int64(2*min(tc.limit, peers+1) + 4); n > bound {
				t.Errorf("one view with limit %d made %d reads, want at most %d", tc.limit, n, bound)
			}
			if m := regexp.MustCompile(`id="nodes-total-count">(\d+)<`).FindStringSubmatch(body); m == nil || m[1] != fmt.Sprint(peers+1) {
				t.Errorf("the page's total: %v, want %d", m, peers+1)
			}
			if rows := strings.Count(body, "data-worker="); rows != tc.wantRows {
				t.Errorf("%d rows, want %d", rows, tc.wantRows)
			}
		})
	}
	if n := srv.SessionsOpened() - opened; n != 0 {
		t.Errorf("the views opened %d ZooKeeper sessions, want none", n)
	}
	for _, q := range []string{"limit=0", "limit=1001", "limit=ten", "limit=5&limit=6"} {
		code, body := httpGet(t, addr, "/status?"+q)
		if code != http.StatusBadRequest || !strings.Contains(body, `"code":"invalid_parameter"`) || !strings.Contains(body, "limit") {
			t.Errorf("/status?%s: %d %s, want 400 invalid_parameter naming the limit", q, code, body)
		}
	}
}

// addStoppedPeers writes n forever znodes of nodes that stopped an hour
// ago (worker IDs 100 on), as they would have left them.
func addStoppedPeers(t *testing.T, srv *zkmem.Server, n int) {
	t.Helper()
	conn := srv.Connect(zkconn.Options{})
	defer conn.Close()
	long := time.Now().Add(-time.Hour).UnixMilli()
	for i := range n {
		key := fmt.Sprintf("peer%04d", i)
		p := fmt.Sprintf("/snowflaked/%s/forever/%s-%010d", sessCluster, key, 5000+i)
		data := fmt.Sprintf(`{"worker_id":%d,"node_key":%q,"addr":"127.0.0.1:1","last_ts":%d,"fence":%d,"updated":%d,"stopped":true}`,
			100+i, key, long, long, long)
		if _, err := conn.Create(p, []byte(data), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatalf("create %s: %v", p, err)
		}
	}
}
