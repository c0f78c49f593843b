package node

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/internal/clock/clocktest"
	"codeberg.org/snowflaked/snowflaked/tests/promtext"
)

// parseScrape reads Prometheus text into series → value (see promtext).
func parseScrape(t testing.TB, text string) map[string]float64 {
	t.Helper()
	out, err := promtext.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// series names a series as parseScrape keys it.
var series = promtext.Series

// scrapeMetrics reads the node's metrics directly.
func scrapeMetrics(t testing.TB, n *node) map[string]float64 {
	t.Helper()
	var b bytes.Buffer
	n.metrics.WritePrometheus(&b)
	return parseScrape(t, b.String())
}

// scrapeHTTP reads GET /metrics.
func scrapeHTTP(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	code, body := httpGet(t, addr, metricsPath)
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", code, body)
	}
	return parseScrape(t, body)
}

// GET /metrics of a standalone node: the families of every source it has
// (none of ZooKeeper or peers), counters that move by exactly the traffic,
// and a rollback beyond tolerance that flips the state gauge, counts a
// transition and one rollback event however many requests saw it.
func TestRunMetricsStandalone(t *testing.T) {
	clk := clocktest.NewFake(time.Now())
	cfg := testConfig(t, 9)
	ln := loopbackListener(t)
	addr := ln.Addr().String()
	startRunOn(t, cfg, ln, withClock(clk))
	waitHTTP(t, addr, "/readyz", func(code int, _ string) bool { return code == http.StatusOK })

	before := scrapeHTTP(t, addr)
	for _, name := range []string{
		"snowflaked_ids_issued_total", series("snowflaked_requests_total", "endpoint", "id", "code", "2xx"),
		"snowflaked_worker_id", "snowflaked_time_field_years_left", "snowflaked_fence_headroom_seconds",
		series("snowflaked_state", "state", "in_service"), series("snowflaked_transitions_total", "reason", "clock_rollback"),
		series("snowflaked_watcher_steps_total", "direction", "backward"), "snowflaked_ntp_enabled",
		series("snowflaked_clock_rollbacks_total", "size", "gt_1s"), "go_goroutines",
	} {
		if _, ok := before[name]; !ok {
			t.Errorf("no series %s in /metrics", name)
		}
	}
	for _, name := range []string{"snowflaked_zk_connected", "snowflaked_last_report_age_seconds", "snowflaked_peer_rounds_total"} {
		if _, ok := before[name]; ok {
			t.Errorf("standalone node exports %s", name)
		}
	}
	if before["snowflaked_worker_id"] != 9 || before[series("snowflaked_state", "state", "in_service")] != 1 {
		t.Errorf("worker_id %v, in_service %v", before["snowflaked_worker_id"], before[series("snowflaked_state", "state", "in_service")])
	}
	if h := before["snowflaked_fence_headroom_seconds"]; h <= 0 || h > cfg.FenceAhead.Seconds() {
		t.Errorf("fence headroom %vs, want in (0, %v]", h, cfg.FenceAhead.Seconds())
	}

	const ids, batch = 7, 25
	for range ids {
		if code, body := httpGet(t, addr, "/id"); code != http.StatusOK {
			t.Fatalf("/id: %d %s", code, body)
		}
	}
	if code, body := httpGet(t, addr, "/ids?count="+strconv.Itoa(batch)); code != http.StatusOK {
		t.Fatalf("/ids: %d %s", code, body)
	}
	after := scrapeHTTP(t, addr)
	deltas := []struct {
		series string
		want   float64
	}{
		{"snowflaked_ids_issued_total", ids + batch},
		{series("snowflaked_requests_total", "endpoint", "id", "code", "2xx"), ids},
		{series("snowflaked_requests_total", "endpoint", "ids", "code", "2xx"), 1},
	}
	for _, d := range deltas {
		if got := after[d.series] - before[d.series]; got != d.want {
			t.Errorf("%s grew by %v, want %v", d.series, got, d.want)
		}
	}

	// A 2s rollback: the next requests are refused, the node leaves service.
	clk.StepWall(-2 * time.Second)
	for range 3 {
		if code, body := httpGet(t, addr, "/id"); code != http.StatusServiceUnavailable {
			t.Fatalf("/id after a 2s rollback: %d %s", code, body)
		}
	}
	rolled := scrapeHTTP(t, addr)
	checks := []struct {
		series string
		want   float64
	}{
		{series("snowflaked_state", "state", "in_service"), 0},
		{series("snowflaked_state", "state", "out_of_service"), 1},
		{series("snowflaked_transitions_total", "reason", "clock_rollback"), after[series("snowflaked_transitions_total", "reason", "clock_rollback")] + 1},
		{series("snowflaked_clock_rollbacks_total", "size", "gt_1s"), after[series("snowflaked_clock_rollbacks_total", "size", "gt_1s")] + 1},
		{series("snowflaked_requests_total", "endpoint", "id", "code", "5xx"), after[series("snowflaked_requests_total", "endpoint", "id", "code", "5xx")] + 3},
	}
	for _, c := range checks {
		if got := rolled[c.series]; got != c.want {
			t.Errorf("after the rollback %s = %v, want %v", c.series, got, c.want)
		}
	}
	if code, _ := httpGet(t, addr, metricsPath+"?x"); code != http.StatusOK {
		t.Errorf("GET /metrics with a query: %d", code)
	}
	resp, err := http.Post("http://"+addr+metricsPath, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /metrics: %d, want 405", resp.StatusCode)
	}
}

// GET /status of a standalone node: this node only, in service.
func TestRunStatusPageStandalone(t *testing.T) {
	cfg := testConfig(t, 4)
	ln := loopbackListener(t)
	addr := ln.Addr().String()
	startRunOn(t, cfg, ln)
	waitHTTP(t, addr, "/readyz", func(code int, _ string) bool { return code == http.StatusOK })
	_, body := waitHTTP(t, addr, statusPath, func(code int, body string) bool {
		return code == http.StatusOK && strings.Contains(body, `id="self-state">in_service<`)
	})
	for _, want := range []string{
		"snowflaked status: " + addr, `id="self-worker">4<`, `id="self-mode">standalone<`, `id="self-version">`, `id="self-layout">41/10/12 epoch`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/status lacks %q:\n%s", want, body)
		}
	}
	// A standalone node has no cluster: no table of one.
	if strings.Contains(body, `id="nodes"`) || strings.Contains(body, "Cluster:") {
		t.Errorf("a standalone node's /status has a cluster table:\n%s", body)
	}
	if strings.Contains(body, `id="list-error"`) {
		t.Errorf("/status of a standalone node shows a list error:\n%s", body)
	}
}

// fakeList is a worker listing that counts its calls and can block.
type fakeList struct {
	calls   atomic.Int64
	release chan struct{} // when not nil, each call waits for it
	rows    []coordinator.WorkerInfo
	err     error
}

func (f *fakeList) list(ctx context.Context, timeout time.Duration, limit int) (coordinator.WorkerPage, error) {
	f.calls.Add(1)
	if timeout <= 0 {
		return coordinator.WorkerPage{}, errors.New("no time")
	}
	if f.release != nil {
		select {
		case <-f.release:
		case <-ctx.Done():
			return coordinator.WorkerPage{}, ctx.Err()
		}
	}
	return coordinator.WorkerPage{Workers: f.rows[:min(len(f.rows), limit)], Total: len(f.rows), Limit: limit}, f.err
}

func TestWorkerListerCaches(t *testing.T) {
	rows := []coordinator.WorkerInfo{
		{WorkerID: 1, NodeKey: "a", LastReportAgeMs: 500},
		{WorkerID: 2, NodeKey: "b", LastReportAgeMs: -1},
	}
	tests := []struct {
		name      string
		err       error
		steps     []time.Duration // advance the monotonic clock, then list
		limits    []int           // each step's limit (nil: 100 each)
		wantCalls int64
		wantAge   int64 // worker 1's age after the last step
	}{
		{"within the TTL: one listing", nil, []time.Duration{0, time.Second, 999 * time.Millisecond}, nil, 1, 500 + 1999},
		{"after the TTL: listed again", nil, []time.Duration{0, 2 * time.Second}, nil, 2, 500},
		{"errors are cached too", errors.New("zookeeper down"), []time.Duration{0, time.Second}, nil, 1, 0},
		{"another limit: listed again", nil, []time.Duration{0, time.Second, 0}, []int{100, 5, 5}, 2, 500},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktest.NewFake(time.Now())
			f := &fakeList{rows: rows, err: tc.err}
			l := newWorkerLister(2*time.Second, clk.Mono, f.list)
			var got []coordinator.WorkerInfo
			var err error
			for i, step := range tc.steps {
				clk.Advance(step)
				limit := 100
				if tc.limits != nil {
					limit = tc.limits[i]
				}
				var pg coordinator.WorkerPage
				pg, err = l.WorkerPage(context.Background(), limit)
				got = pg.Workers
				if !errors.Is(err, tc.err) {
					t.Fatalf("error %v, want %v", err, tc.err)
				}
			}
			if n := f.calls.Load(); n != tc.wantCalls {
				t.Errorf("%d listings, want %d", n, tc.wantCalls)
			}
			if tc.err != nil {
				return
			}
			if len(got) != 2 || got[0].LastReportAgeMs != tc.wantAge || got[1].LastReportAgeMs != -1 {
				t.Errorf("rows %+v, want worker 1 aged %dms and worker 2 never reported", got, tc.wantAge)
			}
			got[0].NodeKey = "changed by the caller"
			again, _ := l.WorkerPage(context.Background(), 100)
			if again.Workers[0].NodeKey != "a" {
				t.Error("a caller's change reached the cache")
			}
		})
	}
}

// Concurrent page views while a listing runs wait for it instead of each
// opening a ZooKeeper session; a view whose context ends stops waiting.
func TestWorkerListerOneListingAtATime(t *testing.T) {
	clk := clocktest.NewFake(time.Now())
	f := &fakeList{rows: []coordinator.WorkerInfo{{WorkerID: 1}}, release: make(chan struct{})}
	l := newWorkerLister(2*time.Second, clk.Mono, f.list)
	const views = 8
	var wg sync.WaitGroup
	errs := make(chan error, views)
	for range views {
		wg.Go(func() {
			pg, err := l.WorkerPage(context.Background(), 100)
			if err == nil && len(pg.Workers) != 1 {
				err = errors.New("wrong rows")
			}
			errs <- err
		})
	}
	deadline := time.Now().Add(5 * time.Second)
	for f.calls.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no listing started within 5s")
		}
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := l.WorkerPage(ctx, 100); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a view with a short deadline: %v, want DeadlineExceeded", err)
	}
	close(f.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := f.calls.Load(); n != 1 {
		t.Errorf("%d listings for %d concurrent views, want 1", n, views)
	}
}
