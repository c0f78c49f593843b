package node

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/internal/cachefile"
	"codeberg.org/snowflaked/snowflaked/snowflake"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// zkTestConfig is a ZooKeeper-mode config with short timings, its own
// cluster and a cache file in a temp dir.
func zkTestConfig(t *testing.T, zk *zkharness.Cluster, cluster, nodeKey string) Config {
	t.Helper()
	cfg := defaultConfig()
	cfg.ZK, cfg.Cluster, cfg.NodeKey, cfg.CreateCluster = zk.ConnectString(), cluster, nodeKey, true
	cfg.Listen = "127.0.0.1:0"
	cfg.CacheFile = filepath.Join(t.TempDir(), "cache.json")
	cfg.ZKSessionTimeout, cfg.ReportInterval, cfg.FenceAhead = 2*time.Second, 500*time.Millisecond, time.Second
	cfg.ZKFenceAhead = 6 * time.Second
	cfg.PeerInterval = time.Second
	return cfg
}

// workerRow returns the ListWorkers row of nodeKey.
func workerRow(t *testing.T, zk *zkharness.Cluster, cluster, nodeKey string) coordinator.WorkerInfo {
	t.Helper()
	adm, err := coordinator.NewAdmin(strings.Split(zk.ConnectString(), ","), "", 10*time.Second)
	if err != nil {
		t.Fatalf("NewAdmin: %v", err)
	}
	defer adm.Close()
	rows, err := adm.ListWorkers(context.Background(), cluster)
	if err != nil {
		t.Fatalf("ListWorkers: %v", err)
	}
	for _, r := range rows {
		if r.NodeKey == nodeKey {
			return r
		}
	}
	t.Fatalf("no row for node key %q in %+v", nodeKey, rows)
	return coordinator.WorkerInfo{}
}

// waitRow polls ListWorkers until cond holds for nodeKey's row (10s).
func waitRow(t *testing.T, zk *zkharness.Cluster, cluster, nodeKey string, cond func(coordinator.WorkerInfo) bool) coordinator.WorkerInfo {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := workerRow(t, zk, cluster, nodeKey)
		if cond(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("row of %q: condition not met within 10s: %+v", nodeKey, r)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestIntegration_RunZooKeeperMode(t *testing.T) {
	zk := zkharness.StartStandalone(t)

	t.Run("claims, serves, reports, stops with the exact fence and restarts without waiting", func(t *testing.T) {
		runClaimsServesStopsAndRestarts(t, zk)
	})

	t.Run("cluster of another layout refused", func(t *testing.T) {
		cfg := zkTestConfig(t, zk, "run2", "node-a")
		ln := loopbackListener(t)
		stop := startRunOn(t, cfg, ln)
		waitHTTP(t, ln.Addr().String(), "/readyz", func(code int, _ string) bool { return code == http.StatusOK })
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		cfg2 := zkTestConfig(t, zk, "run2", "node-b")
		cfg2.Layout = "js53"
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		err := Run(ctx, withSeams(cfg2, withListener(loopbackListener(t))), testLog(t))
		if err == nil || !strings.Contains(err.Error(), "41/5/7") || !strings.Contains(err.Error(), "41/10/12") {
			t.Fatalf("Run with another layout: %v", err)
		}
		if !isInvalidConfig(err) {
			t.Errorf("error %v does not wrap ErrInvalidConfig", err)
		}
	})
}

// runClaimsServesStopsAndRestarts: a node claims, serves, reports, stops
// with the exact fence and restarts without waiting.
func runClaimsServesStopsAndRestarts(t *testing.T, zk *zkharness.Cluster) {
	t.Helper()
	cfg := zkTestConfig(t, zk, "run1", "node-a")
	ln := loopbackListener(t)
	addr := ln.Addr().String()
	stop := startRunOn(t, cfg, ln)
	waitHTTP(t, addr, "/readyz", func(code int, _ string) bool { return code == http.StatusOK })
	row := waitRow(t, zk, "run1", "node-a", func(r coordinator.WorkerInfo) bool { return r.InService && r.LastReport > 0 })
	if row.WorkerID != 0 || row.Addr != addr || !row.LeaseHeld {
		t.Errorf("row %+v, want worker 0 at %s with the lease", row, addr)
	}
	checkZKClockReport(t, addr)
	// Alone in its cluster, in service: /cluster/nodes lists itself.
	if code, body := httpGet(t, addr, "/cluster/nodes"); code != http.StatusOK || body != `{"nodes":[{"worker_id":0,"addr":"`+addr+`"}]}` {
		t.Errorf("/cluster/nodes: %d %s", code, body)
	}
	code, body := httpGet(t, addr, "/ids?count=100")
	if code != http.StatusOK {
		t.Fatalf("/ids: %d %s", code, body)
	}
	ids := strings.Fields(body)
	lastID, _ := strconv.ParseInt(ids[len(ids)-1], 10, 64)
	lastMs := lastID>>22 + 1704067200000
	// The cache file records the identity and when a report reached ZooKeeper.
	e := waitCache(t, cfg.CacheFile, func(e cachefile.Entry) bool { return e.ZKReported > 0 })
	if e.Cluster != "run1" || e.NodeKey != "node-a" || e.WorkerID != 0 {
		t.Errorf("cache entry %+v", e)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	row = workerRow(t, zk, "run1", "node-a")
	e, err := cachefile.Load(cfg.CacheFile)
	if err != nil {
		t.Fatal(err)
	}
	if row.LeaseHeld || row.InService || row.Fence != e.Fence || e.Fence < snowflake.UnixMilli(lastMs) || e.Fence > snowflake.UnixMilliOf(time.Now()) {
		t.Errorf("after stop: row %+v, cache fence %d, last ID at %d", row, e.Fence, lastMs)
	}
	restartIssuesAfter(t, cfg, lastID)
}

// checkZKClockReport checks /clock of a ZooKeeper-mode node at addr, worker
// 0 under node key node-a.
func checkZKClockReport(t *testing.T, addr string) {
	t.Helper()
	var rep ClockInfo
	if code, body := httpGet(t, addr, "/clock"); code != http.StatusOK || json.Unmarshal([]byte(body), &rep) != nil {
		t.Fatalf("/clock: %d %s", code, body)
	}
	if rep.Mode != modeZooKeeper || rep.ZK == nil || !rep.ZK.LeaseHeld || !rep.ZK.Connected || rep.ZK.NodeKey != "node-a" ||
		rep.ZK.Advertise != addr || rep.ZK.WorkerID != 0 || rep.Peers == nil || rep.Watcher == nil || rep.Watcher.Checks == 0 || rep.NTP == nil || rep.NTP.Enabled {
		t.Errorf("/clock report %+v zk %+v", rep, rep.ZK)
	}
}

// restartIssuesAfter restarts the node of cfg and checks its first ID is
// worker 0's and after lastID.
func restartIssuesAfter(t *testing.T, cfg Config, lastID int64) {
	t.Helper()
	ln2 := loopbackListener(t)
	stop2 := startRunOn(t, cfg, ln2)
	waitHTTP(t, ln2.Addr().String(), "/readyz", func(code int, _ string) bool { return code == http.StatusOK })
	code, body := httpGet(t, ln2.Addr().String(), "/id")
	id, _ := strconv.ParseInt(strings.TrimSpace(body), 10, 64)
	if code != http.StatusOK || id <= lastID || (id>>12)&1023 != 0 {
		t.Errorf("after restart /id = %d %q, want worker 0 after %d", code, body, lastID)
	}
	if err := stop2(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func isInvalidConfig(err error) bool { return errors.Is(err, ErrInvalidConfig) }

// testLog writes the node's log to the test log (shown on failure or -v).
func testLog(t *testing.T) zerolog.Logger {
	t.Helper()
	return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
}

// In ZooKeeper mode /metrics carry the coordinator's and the peer check's
// families, and /status lists the cluster's workers from ZooKeeper (two
// nodes: each page shows both, itself marked).
func TestIntegration_RunZooKeeperMetricsAndStatus(t *testing.T) {
	zk := zkharness.StartStandalone(t)
	var addrs []string
	for _, key := range []string{"node-a", "node-b"} {
		cfg := zkTestConfig(t, zk, "observe", key)
		ln := loopbackListener(t)
		startRunOn(t, cfg, ln)
		addrs = append(addrs, ln.Addr().String())
	}
	for _, addr := range addrs {
		waitHTTP(t, addr, "/readyz", func(code int, _ string) bool { return code == http.StatusOK })
	}
	for i, addr := range addrs {
		var m map[string]float64
		deadline := time.Now().Add(10 * time.Second)
		// In service first, then the alive znode and a report follow.
		for m = scrapeHTTP(t, addr); m["snowflaked_zk_reports_total"] < 1 || m["snowflaked_zk_alive"] != 1; m = scrapeHTTP(t, addr) {
			if time.Now().After(deadline) {
				t.Fatalf("node %d: no report counted or no alive znode within 10s", i)
			}
			time.Sleep(20 * time.Millisecond)
		}
		for _, want := range []struct {
			series string
			value  float64
		}{
			{"snowflaked_zk_connected", 1}, {"snowflaked_zk_lease_held", 1}, {"snowflaked_zk_alive", 1},
			{series("snowflaked_state", "state", "in_service"), 1},
		} {
			if got, ok := m[want.series]; !ok || got != want.value {
				t.Errorf("node %d: %s = %v (present %v), want %v", i, want.series, got, ok, want.value)
			}
		}
		code, body := httpGet(t, addr, "/id")
		id, err := strconv.ParseInt(strings.TrimSpace(body), 10, 64)
		if code != http.StatusOK || err != nil {
			t.Fatalf("node %d: /id %d %s", i, code, body)
		}
		if w := m["snowflaked_worker_id"]; w != float64((id>>12)&1023) {
			t.Errorf("node %d: snowflaked_worker_id = %v, its IDs carry worker %d", i, w, (id>>12)&1023)
		}
		for _, name := range []string{"snowflaked_last_report_age_seconds", "snowflaked_peer_rounds_total", "snowflaked_fence_headroom_seconds"} {
			if _, ok := m[name]; !ok {
				t.Errorf("node %d: no %s", i, name)
			}
		}
		_, body = waitHTTP(t, addr, statusPath, func(code int, body string) bool {
			return code == http.StatusOK && strings.Contains(body, "Cluster: 2 nodes, 2 in service")
		})
		for _, want := range []string{"node-<wbr>a<wbr>", "node-<wbr>b<wbr>", "snowflaked status: node-" + string(rune('a'+i)), `class="self"`, `id="self-cluster">`} {
			if !strings.Contains(body, want) {
				t.Errorf("node %d: /status lacks %q", i, want)
			}
		}
		if strings.Contains(body, `id="list-error"`) {
			t.Errorf("node %d: /status shows a list error:\n%s", i, body)
		}
	}
}

// When the cluster's incarnation is known at start (here from the claim),
// the segment service runs on the state file before the node's server
// answers: a request right after the start gets the resumed ranges, never
// a 503 "waiting for its ZooKeeper session" (started from a background
// loop, it raced the first request: TestIntegration_SegmentsResumeWhileZooKeeperIsDown
// failed so on a loaded machine).
func TestIntegration_SegmentServiceRunsBeforeTheServerAnswers(t *testing.T) {
	zk := zkharness.StartStandalone(t)
	cfg := zkTestConfig(t, zk, "segresume", "node-a")
	started := make(chan bool, 1)
	stop := startRun(t, cfg, withBuilt(func(n *node) { started <- n.segments != nil && n.segments.svc.Load() != nil }))
	select {
	case ok := <-started:
		if !ok {
			t.Fatal("the segment service was not running when the node was about to serve")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("node not built within 30s")
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}
