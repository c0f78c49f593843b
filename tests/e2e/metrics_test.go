package e2e

import (
	"math"
	"net/http"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
	"codeberg.org/snowflaked/snowflaked/tests/promtext"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// scrape is one GET /metrics: series → value, each series written as
// name{a="x",b="y"} with its labels sorted by name (see series).
type scrape map[string]float64

// series names a series as scrape keys it.
var series = promtext.Series

// metrics scrapes GET /metrics of the process.
func (p *proc) metrics() scrape {
	p.t.Helper()
	code, body := p.get("/metrics")
	if code != http.StatusOK {
		p.t.Fatalf("GET /metrics: %d %s", code, body)
	}
	out, err := promtext.Parse(body)
	if err != nil {
		p.t.Fatalf("/metrics: %v", err)
	}
	return out
}

// waitMetrics scrapes until cond holds.
func (p *proc) waitMetrics(timeout time.Duration, what string, cond func(scrape) bool) scrape {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		m := p.metrics()
		if cond(m) {
			return m
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("/metrics: %s not seen within %s", what, timeout)
		}
		time.Sleep(pollEvery)
	}
}

// requireSeries fails for every series of names that m lacks.
func requireSeries(t *testing.T, m scrape, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, ok := m[n]; !ok {
			t.Errorf("/metrics has no series %s", n)
		}
	}
}

// Series every node exports, whatever its mode.
var commonSeries = []string{
	"snowflaked_ids_issued_total",
	series("snowflaked_requests_total", "endpoint", "id", "code", "2xx"),
	series("snowflaked_requests_total", "endpoint", "ids", "code", "4xx"),
	series("snowflaked_state", "state", "in_service"),
	series("snowflaked_state", "state", "out_of_service"),
	series("snowflaked_transitions_total", "reason", "clock_rollback"),
	series("snowflaked_clock_rollbacks_total", "size", "gt_1s"),
	series("snowflaked_generator_refusals_total", "cause", "fence"),
	"snowflaked_worker_id", "snowflaked_fence_headroom_seconds", "snowflaked_time_field_years_left",
	"snowflaked_state_age_seconds", "snowflaked_watcher_checks_total", "snowflaked_ntp_enabled",
	"go_goroutines", "process_resident_memory_bytes",
}

// ZooKeeper-mode series.
var zkSeries = []string{
	"snowflaked_zk_connected", "snowflaked_zk_lease_held", "snowflaked_zk_alive", "snowflaked_zk_reports_total",
	"snowflaked_last_report_age_seconds", "snowflaked_peer_rounds_total",
}

// traffic issues IDs in every way and returns how many IDs and requests of
// each endpoint and status class it made.
type traffic struct {
	ids      int
	requests map[string]int // series of snowflaked_requests_total → count
}

func sendTraffic(p *proc) traffic {
	p.t.Helper()
	tr := traffic{requests: map[string]int{}}
	req := func(endpoint, class string) {
		tr.requests[series("snowflaked_requests_total", "endpoint", endpoint, "code", class)]++
	}
	for range 13 {
		if code, body := p.get("/id"); code != http.StatusOK {
			p.t.Fatalf("/id: %d %s", code, body)
		}
		tr.ids++
		req("id", "2xx")
	}
	for _, n := range []int{1, 250, 4097} {
		tr.ids += len(p.ids(n))
		req("ids", "2xx")
	}
	if code, body := p.get("/api/snowflake/get/orders"); code != http.StatusOK {
		p.t.Fatalf("/api/snowflake/get/orders: %d %s", code, body)
	}
	tr.ids++
	req("leaf", "2xx")
	for _, bad := range []string{"/ids?count=0", "/ids?count=many"} {
		if code, body := p.get(bad); code != http.StatusBadRequest {
			p.t.Fatalf("%s: %d %s, want 400", bad, code, body)
		}
		req("ids", "4xx")
	}
	return tr
}

// checkTraffic: the IDs counter grew by exactly the IDs handed out, each
// request counter by exactly its requests.
func checkTraffic(t *testing.T, before, after scrape, tr traffic) {
	t.Helper()
	if got := after["snowflaked_ids_issued_total"] - before["snowflaked_ids_issued_total"]; got != float64(tr.ids) {
		t.Errorf("snowflaked_ids_issued_total grew by %v, want %d (the IDs fetched)", got, tr.ids)
	}
	for s, n := range tr.requests {
		if got := after[s] - before[s]; got != float64(n) {
			t.Errorf("%s grew by %v, want %d", s, got, n)
		}
	}
}

// yearsLeft is what snowflaked_time_field_years_left should read for the
// default layout (41 bits of ms from 2024-01-01).
func yearsLeft() float64 {
	end := time.UnixMilli(1704067200000 + 1<<41)
	return time.Until(end).Hours() / (24 * 365.25)
}

func TestIntegration_MetricsStandalone(t *testing.T) {
	p := startNode(t, binSnowflaked, nodeArgs(t.TempDir(), 11))
	p.waitReadyz(http.StatusOK, readyTimeout)
	before := p.metrics()
	requireSeries(t, before, commonSeries...)
	for _, s := range zkSeries {
		if _, ok := before[s]; ok {
			t.Errorf("a standalone node exports %s", s)
		}
	}
	if before["snowflaked_worker_id"] != 11 || before[series("snowflaked_state", "state", "in_service")] != 1 {
		t.Errorf("worker_id %v, state in_service %v; want 11, 1", before["snowflaked_worker_id"], before[series("snowflaked_state", "state", "in_service")])
	}
	if h := before["snowflaked_fence_headroom_seconds"]; h <= 0 || h > 3 {
		t.Errorf("fence headroom %vs, want in (0, 3] (--fence-ahead 3s)", h)
	}
	if y := before["snowflaked_time_field_years_left"]; math.Abs(y-yearsLeft()) > 0.01 {
		t.Errorf("years left %v, want %.3f", y, yearsLeft())
	}

	tr := sendTraffic(p)
	checkTraffic(t, before, p.metrics(), tr)
	_, body := p.get("/metrics")
	testsupport.CheckMetrics(t, body)

	// Scrapes count as endpoint "other", so they do not disturb the above.
	m1 := p.metrics()
	m2 := p.metrics()
	if got := m2[series("snowflaked_requests_total", "endpoint", "other", "code", "2xx")] - m1[series("snowflaked_requests_total", "endpoint", "other", "code", "2xx")]; got != 1 {
		t.Errorf("one scrape counted %v times as endpoint other", got)
	}
}

func TestIntegration_MetricsZooKeeper(t *testing.T) {
	zk := zkharness.StartStandalone(t)
	p := startNode(t, binSnowflaked, clusterArgs(t.TempDir(), zk.ConnectString(), "metrics", "node-m"))
	p.waitReadyz(http.StatusOK, readyTimeout)
	// In service first; the alive znode and the first report follow.
	before := p.waitMetrics(readyTimeout, "alive znode and a report", func(m scrape) bool {
		return m["snowflaked_zk_alive"] == 1 && m["snowflaked_zk_reports_total"] >= 1
	})
	requireSeries(t, before, commonSeries...)
	requireSeries(t, before, zkSeries...)
	for _, s := range []string{"snowflaked_zk_connected", "snowflaked_zk_lease_held", series("snowflaked_state", "state", "in_service")} {
		if before[s] != 1 {
			t.Errorf("%s = %v, want 1", s, before[s])
		}
	}
	if age := before["snowflaked_last_report_age_seconds"]; age < 0 || age > 10 {
		t.Errorf("last report age %vs with --report-interval %s", age, reportInterval)
	}
	tr := sendTraffic(p)
	after := p.metrics()
	checkTraffic(t, before, after, tr)
	_, body := p.get("/metrics")
	testsupport.CheckMetrics(t, body)
	_, w := decodeMs(p.ids(1)[0])
	if after["snowflaked_worker_id"] != float64(w) {
		t.Errorf("snowflaked_worker_id %v, IDs carry worker %d", after["snowflaked_worker_id"], w)
	}
	if after["snowflaked_zk_reports_total"] <= before["snowflaked_zk_reports_total"] && !t.Failed() {
		// Reports go on every --report-interval (500ms); wait for one.
		p.waitMetrics(10*time.Second, "another report", func(m scrape) bool {
			return m["snowflaked_zk_reports_total"] > before["snowflaked_zk_reports_total"]
		})
	}

	// ZooKeeper goes away: the session gauge drops and the report age grows.
	if err := zk.StopAll(); err != nil {
		t.Fatalf("stop ZooKeeper: %v", err)
	}
	down := p.waitMetrics(30*time.Second, "snowflaked_zk_connected 0", func(m scrape) bool { return m["snowflaked_zk_connected"] == 0 })
	later := p.waitMetrics(10*time.Second, "the report age growing", func(m scrape) bool {
		return m["snowflaked_last_report_age_seconds"] > down["snowflaked_last_report_age_seconds"]+0.5
	})
	if later["snowflaked_zk_report_failures_total"] < down["snowflaked_zk_report_failures_total"] {
		t.Errorf("report failures went down: %v → %v", down["snowflaked_zk_report_failures_total"], later["snowflaked_zk_report_failures_total"])
	}
}

// A 5s rollback (chaos build) seen by a request: the request fails, the
// state gauge flips to out_of_service, the clock_rollback transition and
// one rollback of size gt_1s are counted (the refused requests and the
// watcher report the same rollback); back in service once put right.
func TestIntegration_MetricsChaosRollback(t *testing.T) {
	p := startNode(t, binChaos, nodeArgs(t.TempDir(), 4))
	p.waitReadyz(http.StatusOK, readyTimeout)
	p.ids(100)
	before := p.metrics()
	inService, out := series("snowflaked_state", "state", "in_service"), series("snowflaked_state", "state", "out_of_service")
	trans := series("snowflaked_transitions_total", "reason", "clock_rollback")
	back := series("snowflaked_transitions_total", "reason", "none")
	gt1s := series("snowflaked_clock_rollbacks_total", "size", "gt_1s")
	id5xx := series("snowflaked_requests_total", "endpoint", "id", "code", "5xx")
	if before[inService] != 1 || before[out] != 0 {
		t.Fatalf("before the rollback: in_service %v, out_of_service %v", before[inService], before[out])
	}

	if code, body := p.do(http.MethodPost, "/debug/chaos/clock?offset=-5s"); code != http.StatusOK {
		t.Fatalf("POST offset=-5s: %d %s", code, body)
	}
	refused := 0
	for range 3 {
		if code, body := p.get("/id"); code != http.StatusServiceUnavailable {
			t.Fatalf("/id after a 5s rollback: %d %s", code, body)
		}
		refused++
	}
	p.waitReadyz(http.StatusServiceUnavailable, readyTimeout)
	rolled := p.metrics()
	checks := []struct {
		series string
		want   float64
	}{
		{inService, 0},
		{out, 1},
		{trans, before[trans] + 1},
		{gt1s, before[gt1s] + 1},
		{id5xx, before[id5xx] + float64(refused)},
		{"snowflaked_ids_issued_total", before["snowflaked_ids_issued_total"]},
	}
	for _, c := range checks {
		if got := rolled[c.series]; got != c.want {
			t.Errorf("after the rollback: %s = %v, want %v", c.series, got, c.want)
		}
	}

	if code, body := p.do(http.MethodPost, "/debug/chaos/clock?offset=0"); code != http.StatusOK {
		t.Fatalf("POST offset=0: %d %s", code, body)
	}
	p.waitReadyz(http.StatusOK, readyTimeout)
	again := p.metrics()
	if again[inService] != 1 || again[out] != 0 || again[back] != rolled[back]+1 {
		t.Errorf("back in service: in_service %v, out_of_service %v, transitions{reason=none} %v → %v",
			again[inService], again[out], rolled[back], again[back])
	}
	if again[trans] != rolled[trans] || again[gt1s] != rolled[gt1s] {
		t.Errorf("counts moved without a rollback: transitions %v → %v, rollbacks %v → %v", rolled[trans], again[trans], rolled[gt1s], again[gt1s])
	}
	t.Logf("after one rollback: %s = %v, %s = %v", trans, again[trans], gt1s, again[gt1s])
}
