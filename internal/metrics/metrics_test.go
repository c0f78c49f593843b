package metrics

import (
	"codeberg.org/snowflaked/snowflaked/internal/endpoint"
	"errors"
	"math"
	"net"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/clockguard"
	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/clock/clocktest"
	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/internal/nodestate"
	"codeberg.org/snowflaked/snowflaked/segment"
	"codeberg.org/snowflaked/snowflaked/server"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

func TestNew_BadConfig(t *testing.T) {
	snapshot := func() nodestate.Snapshot { return nodestate.Snapshot{Layout: snowflake.DefaultLayout()} }
	tests := []struct {
		name string
		cfg  Config
	}{
		{"no snapshot", Config{}},
		{"negative tolerance", Config{Snapshot: snapshot, RollbackTolerance: -time.Millisecond}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(tc.cfg)
			if !errors.Is(err, errBadConfig) || m != nil {
				t.Fatalf("New = %v, %v; want nil and an error wrapping ErrBadConfig", m, err)
			}
		})
	}
}

// TestScrape_Families: every family operators rely on is there
// with its labels and the snapshot's values.
func TestScrape_Families(t *testing.T) {
	f := newFixture(t, nil)
	f.snap.Generator.Stats = snowflake.Stats{SequenceWaits: 7, RollbackWaits: 2, Rollbacks: 3, FenceHits: 4, Waited: 1500 * time.Millisecond}
	f.snap.Watcher = &clockguard.WatcherStats{Checks: 100, BackwardSteps: 2, ForwardSteps: 1, LargestBackward: 250 * time.Millisecond, LargestForward: 2 * time.Second}
	f.snap.NTP = &clockguard.NTPSnapshot{Enabled: true, Rounds: 5, UnreachableRounds: 1, OffsetFailures: 2, ServerErrors: 3,
		Last: &clockguard.NTPResult{Server: "ntp.example:123", Offset: -12 * time.Millisecond, RTT: 3 * time.Millisecond, CheckedAt: testNow.Add(-30 * time.Second)}}
	f.snap.Peers = &clockguard.PeerSnapshot{Median: 4 * time.Millisecond, Split: true, Reachable: 2, Unreachable: 1, CheckedAt: testNow, Rounds: 6, OffsetFailures: 1, UnreachablePeers: 2, SourceErrors: 1, LivePeers: 40, Confirmations: 3, Unconfirmed: 2, WideRounds: 5, ReturnsHeld: 1,
		Peers: []clockguard.PeerResult{
			{WorkerID: 1, Addr: "10.0.0.1:8080", Offset: 2 * time.Millisecond, RTT: time.Millisecond},
			{WorkerID: 2, Addr: "10.0.0.2:8080", Offset: 6 * time.Millisecond, RTT: 2 * time.Millisecond},
			{WorkerID: 3, Addr: "10.0.0.3:8080", Error: "connection refused"},
		}}
	f.snap.ZK = &coordinator.Status{Connected: true, LeaseHeld: true, AlivePresent: true, Reports: 9, ReportFailures: 3, LastReportAgeMs: 1500,
		FailuresByCause: map[string]int64{"connection": 2, "taken_over": 1}, ZKFence: 1_800_000_000_000, ZKFenceHeadroomMs: 25_500, ZKFenceAheadMs: 30_000}
	f.m.IssuedIDs(5)
	f.m.Request(endpoint.ID, 200)
	f.m.Request(endpoint.IDs, 503)

	ex := scrape(t, f.m)
	l := snowflake.DefaultLayout()
	years := (float64(l.End().Unix()) - float64(testNow.Unix())) / secondsPerYear
	tests := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"snowflaked_ids_issued_total", nil, 5},
		{"snowflaked_requests_total", []string{"endpoint", "id", "code", "2xx"}, 1},
		{"snowflaked_requests_total", []string{"endpoint", "ids", "code", "5xx"}, 1},
		{"snowflaked_requests_total", []string{"endpoint", "decode", "code", "4xx"}, 0},
		{"snowflaked_worker_id", nil, 42},
		{"snowflaked_time_field_years_left", nil, years},
		{"snowflaked_sequence_exhausted_waits_total", nil, 7},
		{"snowflaked_clock_wait_seconds_total", nil, 1.5},
		{"snowflaked_generator_refusals_total", []string{"cause", "rollback"}, 3},
		{"snowflaked_generator_refusals_total", []string{"cause", "fence"}, 4},
		{"snowflaked_clock_rollbacks_total", []string{"size", "le_5ms"}, 2}, // the within-tolerance waits
		{"snowflaked_clock_rollbacks_total", []string{"size", "le_100ms"}, 0},
		{"snowflaked_clock_rollbacks_total", []string{"size", "le_1s"}, 0},
		{"snowflaked_clock_rollbacks_total", []string{"size", "gt_1s"}, 0},
		{"snowflaked_state", []string{"state", "starting"}, 1},
		{"snowflaked_state", []string{"state", "in_service"}, 0},
		{"snowflaked_state", []string{"state", "out_of_service"}, 0},
		{"snowflaked_state", []string{"state", "stopping"}, 0},
		{"snowflaked_state_reason", []string{"reason", "starting"}, 1},
		{"snowflaked_state_reason", []string{"reason", "clock_rollback"}, 0},
		{"snowflaked_state_reason", []string{"reason", "none"}, 0},
		{"snowflaked_state_age_seconds", nil, 0},
		{"snowflaked_transitions_total", []string{"reason", "none"}, 0},
		{"snowflaked_transitions_total", []string{"reason", "clock_rollback"}, 0},
		{"snowflaked_transitions_total", []string{"reason", "zk_fence"}, 0},
		{"snowflaked_worker_id_max", nil, 1023},
		{"snowflaked_fence_headroom_seconds", nil, 3},
		{"snowflaked_watcher_steps_total", []string{"direction", "backward"}, 2},
		{"snowflaked_watcher_steps_total", []string{"direction", "forward"}, 1},
		{"snowflaked_watcher_largest_step_seconds", []string{"direction", "backward"}, 0.25},
		{"snowflaked_watcher_largest_step_seconds", []string{"direction", "forward"}, 2},
		{"snowflaked_watcher_checks_total", nil, 100},
		{"snowflaked_ntp_enabled", nil, 1},
		{"snowflaked_ntp_offset_seconds", nil, -0.012},
		{"snowflaked_ntp_rtt_seconds", nil, 0.003},
		{"snowflaked_ntp_last_answer_age_seconds", nil, 30},
		{"snowflaked_ntp_rounds_total", nil, 5},
		{"snowflaked_ntp_unreachable_rounds_total", nil, 1},
		{"snowflaked_ntp_offset_failures_total", nil, 2},
		{"snowflaked_ntp_server_errors_total", nil, 3},
		{"snowflaked_peer_offset_seconds", nil, 0.004},
		{"snowflaked_peer_offset_seconds", []string{"peer", "10.0.0.1:8080", "worker_id", "1"}, 0.002},
		{"snowflaked_peer_offset_seconds", []string{"peer", "10.0.0.2:8080", "worker_id", "2"}, 0.006},
		{"snowflaked_peer_rtt_seconds", []string{"peer", "10.0.0.2:8080", "worker_id", "2"}, 0.002},
		{"snowflaked_peers", []string{"status", "reachable"}, 2},
		{"snowflaked_peers", []string{"status", "unreachable"}, 1},
		{"snowflaked_peer_split", nil, 1},
		{"snowflaked_peer_rounds_total", nil, 6},
		{"snowflaked_peer_offset_failures_total", nil, 1},
		{"snowflaked_peer_unreachable_total", nil, 2},
		{"snowflaked_peer_source_errors_total", nil, 1},
		{"snowflaked_peers_live", nil, 40},
		{"snowflaked_peer_confirmations_total", nil, 3},
		{"snowflaked_peer_unconfirmed_total", nil, 2},
		{"snowflaked_peer_wide_rounds_total", nil, 5},
		{"snowflaked_peer_returns_held_total", nil, 1},
		{"snowflaked_zk_connected", nil, 1},
		{"snowflaked_zk_lease_held", nil, 1},
		{"snowflaked_zk_alive", nil, 1},
		{"snowflaked_zk_from_cache", nil, 0},
		{"snowflaked_zk_reports_total", nil, 9},
		{"snowflaked_zk_report_failures_total", []string{"cause", "connection"}, 2},
		{"snowflaked_zk_report_failures_total", []string{"cause", "taken_over"}, 1},
		{"snowflaked_zk_report_failures_total", []string{"cause", "deleted"}, 0},
		{"snowflaked_zk_report_failures_total", []string{"cause", "other"}, 0},
		{"snowflaked_last_report_age_seconds", nil, 1.5},
		{"snowflaked_zk_fence_headroom_seconds", nil, 25.5},
		{"snowflaked_zk_fence_ahead_seconds", nil, 30},
	}
	for _, tc := range tests {
		got := mustFind(t, ex, tc.name, tc.labels...)
		if math.Abs(got-tc.want) > 1e-9*math.Max(1, math.Abs(tc.want)) {
			t.Errorf("%s%q = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	// The unreachable peer has no offset series.
	if _, ok := ex.find("snowflaked_peer_offset_seconds", "peer", "10.0.0.3:8080", "worker_id", "3"); ok {
		t.Error("an unreachable peer has an offset series")
	}
	// Every request counter exists from the start: 9 endpoints × 6 classes.
	if n := len(ex.samplesOf("snowflaked_requests_total")); n != len(endpoint.Labels)*len(statusClasses) {
		t.Errorf("%d request series, want %d", n, len(endpoint.Labels)*len(statusClasses))
	}
	// The families read at scrape time carry HELP and TYPE.
	for _, name := range []string{"snowflaked_state", "snowflaked_clock_rollbacks_total", "snowflaked_peer_offset_seconds"} {
		if ex.types[name] == "" || ex.helps[name] == "" {
			t.Errorf("%s: TYPE %q, HELP %q; want both", name, ex.types[name], ex.helps[name])
		}
	}
}

// TestScrape_OptionalSections: a nil section of the snapshot leaves its
// families out (e.g. standalone mode has no ZooKeeper figures), and never
// breaks the scrape.
func TestScrape_OptionalSections(t *testing.T) {
	tests := []struct {
		name   string
		drop   func(*nodestate.Snapshot)
		absent []string
	}{
		{"no zookeeper", func(s *nodestate.Snapshot) { s.ZK = nil }, []string{"snowflaked_zk_connected", "snowflaked_zk_report_failures_total", "snowflaked_last_report_age_seconds", "snowflaked_zk_fence_headroom_seconds", "snowflaked_prev_holder_fence_wait_seconds"}},
		{"no ntp", func(s *nodestate.Snapshot) { s.NTP = nil }, []string{"snowflaked_ntp_enabled", "snowflaked_ntp_offset_seconds"}},
		{"no peers", func(s *nodestate.Snapshot) { s.Peers = nil }, []string{"snowflaked_peer_offset_seconds", "snowflaked_peer_rounds_total"}},
		{"no watcher", func(s *nodestate.Snapshot) { s.Watcher = nil }, []string{"snowflaked_watcher_steps_total"}},
		{"no fence", func(s *nodestate.Snapshot) { s.Fence = 0 }, []string{"snowflaked_fence_headroom_seconds"}},
		{"no segments", func(s *nodestate.Snapshot) { s.Segments = nil }, []string{"snowflaked_segment_issued_total", "snowflaked_segment_possibly_lost_total"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			f.snap.NTP = &clockguard.NTPSnapshot{Enabled: true, Last: &clockguard.NTPResult{Offset: time.Millisecond}}
			f.snap.Peers = &clockguard.PeerSnapshot{Reachable: 1, CheckedAt: testNow, Peers: []clockguard.PeerResult{{WorkerID: 1, Addr: "a:1"}}}
			f.snap.ZK = &coordinator.Status{LastReportAgeMs: 10, ZKFence: 1, ZKFenceHeadroomMs: 5}
			f.snap.Segments = []segment.TagStatus{{Tag: "orders", Issued: 1}}
			tc.drop(&f.snap)
			ex := scrape(t, f.m)
			for _, name := range tc.absent {
				if n := len(ex.samplesOf(name)); n != 0 {
					t.Errorf("%s: %d series, want none", name, n)
				}
			}
			mustFind(t, ex, "snowflaked_worker_id")
			mustFind(t, ex, "snowflaked_state", "state", "starting")
		})
	}
}

// TestScrape_NotYetKnown: figures that do not exist yet are absent rather
// than a misleading zero.
func TestScrape_NotYetKnown(t *testing.T) {
	f := newFixture(t, nil)
	f.snap.Fence = 0
	f.snap.NTP = &clockguard.NTPSnapshot{Enabled: true} // no answer yet
	f.snap.ZK = &coordinator.Status{LastReportAgeMs: -1}
	ex := scrape(t, f.m)
	for _, name := range []string{"snowflaked_ntp_offset_seconds", "snowflaked_ntp_rtt_seconds", "snowflaked_last_report_age_seconds",
		"snowflaked_fence_headroom_seconds", "snowflaked_peers"} {
		if n := len(ex.samplesOf(name)); n != 0 {
			t.Errorf("%s: %d series before it is known, want none", name, n)
		}
	}
	// Disabled NTP: only the enabled gauge, at 0.
	f.snap.NTP = &clockguard.NTPSnapshot{}
	ex = scrape(t, f.m)
	if v := mustFind(t, ex, "snowflaked_ntp_enabled"); v != 0 {
		t.Errorf("snowflaked_ntp_enabled = %v, want 0", v)
	}
	if n := len(ex.samplesOf("snowflaked_ntp_rounds_total")); n != 0 {
		t.Errorf("disabled NTP exports %d round series", n)
	}
}

// TestScrape_HostilePeerAddress: label values are escaped, so an address
// from ZooKeeper cannot break the format or forge a series.
func TestScrape_HostilePeerAddress(t *testing.T) {
	f := newFixture(t, nil)
	evil := "x\"} 1\nsnowflaked_worker_id 999\n\\{"
	f.snap.Peers = &clockguard.PeerSnapshot{Reachable: 1, CheckedAt: testNow, Median: time.Millisecond,
		Peers: []clockguard.PeerResult{{WorkerID: 5, Addr: evil, Offset: time.Millisecond}}}
	ex := scrape(t, f.m)
	if v := mustFind(t, ex, "snowflaked_peer_offset_seconds", "peer", evil, "worker_id", "5"); v != 0.001 {
		t.Errorf("offset of the hostile peer = %v, want 0.001", v)
	}
	if got := ex.samplesOf("snowflaked_worker_id"); len(got) != 1 || got[0].value != 42 {
		t.Errorf("snowflaked_worker_id series = %+v, want one at 42", got)
	}
}

// TestScrape_Transitions: state and transition counters follow a real
// guard through a node's life.
func TestScrape_Transitions(t *testing.T) {
	f := newFixture(t, nil)
	check := f.guard.Check(health.ReasonNTPOffset)
	steps := []struct {
		name        string
		do          func()
		state       string
		transitions map[string]float64
	}{
		{"starting", func() {}, "starting", map[string]float64{"none": 0, "ntp_offset": 0}},
		{"enter service", check.Pass, "in_service", map[string]float64{"none": 1, "ntp_offset": 0}},
		{"ntp fails", func() { check.Fail("offset 2s") }, "out_of_service", map[string]float64{"none": 1, "ntp_offset": 1}},
		{"figures change only", func() { check.Fail("offset 3s") }, "out_of_service", map[string]float64{"none": 1, "ntp_offset": 1}},
		{"back in service", check.Pass, "in_service", map[string]float64{"none": 2, "ntp_offset": 1}},
		{"stop", f.guard.Stop, "stopping", map[string]float64{"none": 2, "ntp_offset": 1, "stopping": 1}},
	}
	for _, st := range steps {
		f.clk.Advance(time.Second)
		st.do()
		ex := scrape(t, f.m)
		for _, s := range health.States {
			want := 0.0
			if s.String() == st.state {
				want = 1
			}
			if got := mustFind(t, ex, "snowflaked_state", "state", s.String()); got != want {
				t.Errorf("%s: snowflaked_state{state=%q} = %v, want %v", st.name, s, got, want)
			}
		}
		for reason, want := range st.transitions {
			if got := mustFind(t, ex, "snowflaked_transitions_total", "reason", reason); got != want {
				t.Errorf("%s: snowflaked_transitions_total{reason=%q} = %v, want %v", st.name, reason, got, want)
			}
		}
	}
}

// TestObserveRollback: reports of one rollback count once, in the class of
// the first report's size; separate rollbacks count separately.
func TestObserveRollback(t *testing.T) {
	type report struct {
		after  time.Duration // clock advance before the report
		behind time.Duration
	}
	tests := []struct {
		name    string
		reports []report
		want    [4]float64 // le_5ms, le_100ms, le_1s, gt_1s
	}{
		{"nothing", nil, [4]float64{}},
		{"zero and negative are ignored", []report{{0, 0}, {0, -time.Second}}, [4]float64{}},
		{"class bounds", []report{
			{0, 5 * time.Millisecond}, {10 * time.Second, 5*time.Millisecond + 1},
			{10 * time.Second, 100 * time.Millisecond}, {10 * time.Second, 100*time.Millisecond + 1},
			{10 * time.Second, time.Second}, {10 * time.Second, time.Second + 1},
		}, [4]float64{1, 2, 2, 1}},
		{"every refused request of one rollback counts once", func() []report {
			// Clock 2s back; requests every 10ms for 1.5s see it shrink.
			rs := []report{{0, 2 * time.Second}}
			for i := 1; i <= 150; i++ {
				rs = append(rs, report{10 * time.Millisecond, 2*time.Second - time.Duration(i)*10*time.Millisecond})
			}
			return rs
		}(), [4]float64{0, 0, 0, 1}},
		{"watcher then generator", []report{{0, 50 * time.Millisecond}, {20 * time.Millisecond, 30 * time.Millisecond}}, [4]float64{0, 1, 0, 0}},
		{"generator then watcher a little later", []report{{0, 40 * time.Millisecond}, {0, 60 * time.Millisecond}}, [4]float64{0, 1, 0, 0}},
		{"two rollbacks seconds apart", []report{{0, 300 * time.Millisecond}, {5 * time.Second, 10 * time.Millisecond}}, [4]float64{0, 1, 1, 0}},
		{"a slightly deeper report of the same step", []report{{0, 2 * time.Second}, {100 * time.Millisecond, 2500 * time.Millisecond}}, [4]float64{0, 0, 0, 1}},
		{"a second step back during a rollback counts again", []report{{0, 2 * time.Second}, {100 * time.Millisecond, 3500 * time.Millisecond}}, [4]float64{0, 0, 0, 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			for _, r := range tc.reports {
				f.clk.Advance(r.after)
				f.m.ObserveRollback(r.behind, f.now())
			}
			ex := scrape(t, f.m)
			for i, size := range rollbackSizes {
				if got := mustFind(t, ex, "snowflaked_clock_rollbacks_total", "size", size); got != tc.want[i] {
					t.Errorf("size %s: %v, want %v", size, got, tc.want[i])
				}
			}
		})
	}
}

// TestObserveRollback_ClockSetRightBetweenReports: the clock goes 5s back,
// a refused request reports it; the watcher measures the same step, and the
// clock is set right before its report reaches the metrics. Merging uses
// the watcher's reading, not the clock's now: one rollback, counted once.
// (CI saw this count twice when the catch-up point was the clock's now plus
// the old step: 5s past the first report's.)
func TestObserveRollback_ClockSetRightBetweenReports(t *testing.T) {
	f := newFixture(t, nil)
	f.clk.StepWall(-5 * time.Second)
	f.m.ObserveRollback(5*time.Second-10*time.Millisecond, f.now()) // the generator
	f.clk.Advance(7 * time.Millisecond)
	watcherReading := f.now()
	f.clk.StepWall(5 * time.Second) // set right before the watcher's report lands
	f.m.ObserveRollback(5*time.Second, watcherReading)
	ex := scrape(t, f.m)
	if got := mustFind(t, ex, "snowflaked_clock_rollbacks_total", "size", sizeGT1s); got != 1 {
		t.Fatalf("snowflaked_clock_rollbacks_total{size=gt_1s} = %v, want 1 (one rollback)", got)
	}
}

// TestObserveRollback_NilMetrics: the node may wire the call before the
// metrics exist.
func TestObserveRollback_NilMetrics(t *testing.T) {
	var m *Metrics
	m.ObserveRollback(time.Second, time.Now()) // must not panic
}

// TestRollbackWaitsClass: the generator's within-tolerance waits count in
// the class holding the tolerance.
func TestRollbackWaitsClass(t *testing.T) {
	tests := []struct {
		tolerance time.Duration
		class     string
	}{
		{0, sizeLE5ms},
		{5 * time.Millisecond, sizeLE5ms},
		{50 * time.Millisecond, sizeLE100ms},
		{time.Second, sizeLE1s},
		{2 * time.Second, sizeGT1s},
	}
	for _, tc := range tests {
		t.Run(tc.tolerance.String(), func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.RollbackTolerance = tc.tolerance })
			f.snap.Generator.Stats = snowflake.Stats{RollbackWaits: 3}
			f.m.ObserveRollback(10*time.Second, f.now())
			ex := scrape(t, f.m)
			for _, size := range rollbackSizes {
				want := 0.0
				if size == tc.class {
					want += 3
				}
				if size == sizeGT1s {
					want++
				}
				if got := mustFind(t, ex, "snowflaked_clock_rollbacks_total", "size", size); got != want {
					t.Errorf("size %s: %v, want %v", size, got, want)
				}
			}
		})
	}
}

// TestRealGenerator: the scrape reads a real generator's counters after it
// waited out a small rollback and ran out of a tick's sequence.
func TestRealGenerator(t *testing.T) {
	clk := clocktest.NewFake(testNow)
	clk.SetAutoStep(20 * time.Microsecond) // waiting loops see time pass
	gen, err := snowflake.NewGenerator(snowflake.Config{Layout: snowflake.DefaultLayout(), WorkerID: 3, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(Config{Snapshot: liveSnapshot(gen, health.New(nopLog, nil), clk), RollbackTolerance: snowflake.DefaultRollbackTolerance})
	if err != nil {
		t.Fatal(err)
	}
	// Two full ticks (4096 IDs each): the second needs a sequence wait, and
	// the last tick is used up, so a clock behind it must be waited out.
	if _, err := gen.NextN(2 * 4096); err != nil {
		t.Fatal(err)
	}
	clk.StepWall(-2 * time.Millisecond) // within tolerance
	if _, err := gen.Next(); err != nil {
		t.Fatal(err)
	}
	st := gen.Stats()
	if st.RollbackWaits < 1 {
		t.Fatalf("generator stats %+v: no rollback wait, the test did not exercise it", st)
	}
	ex := scrape(t, m)
	if got := mustFind(t, ex, "snowflaked_clock_rollbacks_total", "size", sizeLE5ms); got != float64(st.RollbackWaits) {
		t.Errorf("le_5ms = %v, want the generator's %d waits", got, st.RollbackWaits)
	}
	if got := mustFind(t, ex, "snowflaked_sequence_exhausted_waits_total"); got != float64(st.SequenceWaits) || got < 1 {
		t.Errorf("sequence waits = %v, want the generator's %d (at least 1)", got, st.SequenceWaits)
	}
	if got := mustFind(t, ex, "snowflaked_clock_wait_seconds_total"); got <= 0 {
		t.Errorf("clock wait seconds = %v, want > 0", got)
	}
	if got := mustFind(t, ex, "snowflaked_worker_id"); got != 3 {
		t.Errorf("worker id = %v, want 3", got)
	}
}

// TestRequestClasses: endpoints and status codes map to their fixed series;
// anything unexpected lands in "other" instead of being dropped.
func TestRequestClasses(t *testing.T) {
	tests := []struct {
		endpoint endpoint.Endpoint
		status   int
		wantEP   string
		wantCode string
	}{
		{endpoint.ID, 200, "id", "2xx"},
		{endpoint.IDs, 400, "ids", "4xx"},
		{endpoint.Decode, 404, "decode", "4xx"},
		{endpoint.Leaf, 503, "leaf", "5xx"},
		{endpoint.Healthz, 204, "healthz", "2xx"},
		{endpoint.Readyz, 503, "readyz", "5xx"},
		{endpoint.Time, 301, "time", "3xx"},
		{endpoint.Clock, 100, "clock", "1xx"},
		{endpoint.Other, 405, "other", "4xx"},
		{endpoint.Segment, 201, "segment", "2xx"},
		{endpoint.UUID, 500, "uuid", "5xx"},
		{endpoint.Count, 200, "other", "2xx"},
		{endpoint.Count + 7, 302, "other", "3xx"},
		{endpoint.ID, 0, "id", "other"},
		{endpoint.ID, 600, "id", "other"},
		{endpoint.ID, 99, "id", "other"},
		{endpoint.ID, 599, "id", "5xx"},
	}
	for _, tc := range tests {
		t.Run(tc.endpoint.String()+"/"+time.Duration(tc.status).String(), func(t *testing.T) {
			f := newFixture(t, nil)
			f.m.Request(tc.endpoint, tc.status)
			f.m.Request(tc.endpoint, tc.status)
			ex := scrape(t, f.m)
			total := 0.0
			for _, s := range ex.samplesOf("snowflaked_requests_total") {
				total += s.value
			}
			if got := mustFind(t, ex, "snowflaked_requests_total", "endpoint", tc.wantEP, "code", tc.wantCode); got != 2 || total != 2 {
				t.Errorf("{%s,%s} = %v, total %v; want 2 and 2", tc.wantEP, tc.wantCode, got, total)
			}
		})
	}
}

func TestIssuedIDs_IgnoresNonPositive(t *testing.T) {
	f := newFixture(t, nil)
	f.m.IssuedIDs(0)
	f.m.IssuedIDs(-5)
	f.m.IssuedIDs(3)
	if got := mustFind(t, scrape(t, f.m), "snowflaked_ids_issued_total"); got != 3 {
		t.Errorf("ids issued = %v, want 3", got)
	}
}

func TestHandler_Methods(t *testing.T) {
	f := newFixture(t, nil)
	tests := []struct {
		method   string
		status   int
		wantBody string
	}{
		{fasthttp.MethodGet, 200, "snowflaked_worker_id 42\n"},
		{fasthttp.MethodHead, 200, ""},
		{fasthttp.MethodPost, 405, `"method_not_allowed"`},
		{fasthttp.MethodDelete, 405, `"method_not_allowed"`},
	}
	for _, tc := range tests {
		t.Run(tc.method, func(t *testing.T) {
			ctx := &fasthttp.RequestCtx{}
			ctx.Request.Header.SetMethod(tc.method)
			ctx.Request.SetRequestURI("/metrics")
			f.m.Handler()(ctx)
			if sc := ctx.Response.StatusCode(); sc != tc.status {
				t.Fatalf("status %d, want %d", sc, tc.status)
			}
			if !strings.Contains(string(ctx.Response.Body()), tc.wantBody) {
				t.Errorf("body %.200q does not contain %q", ctx.Response.Body(), tc.wantBody)
			}
			if tc.status == 405 && string(ctx.Response.Header.Peek("Allow")) != "GET, HEAD" {
				t.Errorf("405 without Allow: GET, HEAD")
			}
		})
	}
}

func TestProcessMetrics(t *testing.T) {
	for _, on := range []bool{false, true} {
		f := newFixture(t, func(c *Config) { c.ProcessMetrics = on })
		ex := scrape(t, f.m)
		_, got := ex.find("go_goroutines")
		if got != on {
			t.Errorf("ProcessMetrics %v: go_goroutines present = %v", on, got)
		}
	}
}

// go_goroutines is the program's goroutines, as runtime.NumGoroutine and
// Prometheus's Go collector count them (not runtime/metrics', which holds
// the runtime's own too).
func TestGoroutinesAsNumGoroutine(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.ProcessMetrics = true })
	for range 20 { // bounded: goroutines of other tests may come and go between the readings
		before := runtime.NumGoroutine()
		ex := scrape(t, f.m)
		after := runtime.NumGoroutine()
		got, ok := ex.find("go_goroutines")
		if !ok {
			t.Fatal("no go_goroutines")
		}
		if before == after {
			if got != float64(before) {
				t.Fatalf("go_goroutines %v, runtime.NumGoroutine %d", got, before)
			}
			return
		}
	}
	t.Skip("the goroutine count never held still across a scrape")
}

// TestServer_Loopback: the metrics observe a real server on 127.0.0.1 and
// are scraped through it.
func TestServer_Loopback(t *testing.T) {
	clk := clock.NewSystem()
	gen, err := snowflake.NewGenerator(snowflake.Config{Layout: snowflake.DefaultLayout(), WorkerID: 9, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	guard := health.New(nopLog, nil)
	check := guard.Check(health.ReasonNTPOffset)
	check.Pass()
	m, err := New(Config{Snapshot: liveSnapshot(gen, guard, clk)})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{IDs: gen, Guard: guard, Clock: clk, Log: nopLog, Observer: m,
		Routes: map[string]fasthttp.RequestHandler{"/metrics": m.Handler()}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Shutdown(t.Context())
		<-done
	})
	base := "http://" + ln.Addr().String()
	client := &fasthttp.Client{}
	get := func(method, path string) (int, string) {
		t.Helper()
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.SetRequestURI(base + path)
		req.Header.SetMethod(method)
		if err := client.DoTimeout(req, resp, 5*time.Second); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return resp.StatusCode(), string(resp.Body())
	}
	for range 3 {
		if sc, _ := get("GET", "/id"); sc != 200 {
			t.Fatalf("GET /id: %d", sc)
		}
	}
	if sc, _ := get("GET", "/ids?count=5"); sc != 200 {
		t.Fatalf("GET /ids: %d", sc)
	}
	get("GET", "/nope")
	get("POST", "/id")
	check.Fail("test") // out of service: /id answers 503
	if sc, _ := get("GET", "/id"); sc != 503 {
		t.Fatalf("GET /id out of service: %d", sc)
	}

	sc, body := get("GET", "/metrics")
	if sc != 200 {
		t.Fatalf("GET /metrics: %d %s", sc, body)
	}
	ex, err := parseExposition(body)
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, body)
	}
	tests := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"snowflaked_ids_issued_total", nil, 8},
		{"snowflaked_requests_total", []string{"endpoint", "id", "code", "2xx"}, 3},
		{"snowflaked_requests_total", []string{"endpoint", "ids", "code", "2xx"}, 1},
		{"snowflaked_requests_total", []string{"endpoint", "other", "code", "4xx"}, 1},
		{"snowflaked_requests_total", []string{"endpoint", "id", "code", "4xx"}, 1},
		{"snowflaked_requests_total", []string{"endpoint", "id", "code", "5xx"}, 1},
		{"snowflaked_state", []string{"state", "out_of_service"}, 1},
		{"snowflaked_transitions_total", []string{"reason", "ntp_offset"}, 1},
		{"snowflaked_worker_id", nil, 9},
	}
	for _, tc := range tests {
		if got := mustFind(t, ex, tc.name, tc.labels...); got != tc.want {
			t.Errorf("%s%q = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
}

// Segment mode: one series per tag and family, and the IDs possibly lost.
func TestScrape_Segments(t *testing.T) {
	f := newFixture(t, nil)
	f.snap.Segments = []segment.TagStatus{
		{Tag: "orders", Issued: 42, Loads: 3, LastLoad: 0.004, Available: 958, Step: 2000, Ahead: 100, Wasted: 7},
		{Tag: "accounts", Issued: 1},
	}
	f.snap.PossiblyLost = 12
	ex := scrape(t, f.m)
	for _, tc := range []struct {
		name string
		want float64
	}{
		{"snowflaked_segment_issued_total", 42}, {"snowflaked_segment_range_loads_total", 3},
		{"snowflaked_segment_last_load_seconds", 0.004}, {"snowflaked_segment_available", 958},
		{"snowflaked_segment_step", 2000}, {"snowflaked_segment_mark_ahead", 100}, {"snowflaked_segment_wasted_total", 7},
	} {
		if got := mustFind(t, ex, tc.name, "tag", "orders"); got != tc.want {
			t.Errorf("%s{tag=orders} = %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := mustFind(t, ex, "snowflaked_segment_issued_total", "tag", "accounts"); got != 1 {
		t.Errorf("accounts issued %v", got)
	}
	if got := mustFind(t, ex, "snowflaked_segment_possibly_lost_total"); got != 12 {
		t.Errorf("snowflaked_segment_possibly_lost_total = %v, want 12", got)
	}
	if n := len(ex.samplesOf("snowflaked_tokens_refused_total")); n != 0 {
		t.Errorf("%d token refusal series without a tag that requires a token, want none", n)
	}
	// A tag that requires a token: its refusals by reason.
	f.snap.Segments = append(f.snap.Segments, segment.TagStatus{Tag: "secret", Token: true, RefusedRequired: 3, RefusedInvalid: 5})
	ex = scrape(t, f.m)
	for reason, want := range map[string]float64{"token_required": 3, "token_invalid": 5} {
		if got := mustFind(t, ex, "snowflaked_tokens_refused_total", "tag", "secret", "reason", reason); got != want {
			t.Errorf("snowflaked_tokens_refused_total{tag=secret,reason=%s} = %v, want %v", reason, got, want)
		}
	}
	if n := len(ex.samplesOf("snowflaked_tokens_refused_total")); n != 2 {
		t.Errorf("%d token refusal series, want 2 (the plain tags have none)", n)
	}
	// Segment mode before the service runs: no tags yet, the store's count.
	f.snap.Segments = []segment.TagStatus{}
	ex = scrape(t, f.m)
	if n := len(ex.samplesOf("snowflaked_segment_issued_total")); n != 0 {
		t.Errorf("%d segment series without tags, want none", n)
	}
	mustFind(t, ex, "snowflaked_segment_possibly_lost_total")
	f.snap.Segments = nil
	ex = scrape(t, f.m)
	for _, name := range []string{"snowflaked_segment_issued_total", "snowflaked_segment_possibly_lost_total"} {
		if len(ex.samplesOf(name)) != 0 {
			t.Errorf("%s exported outside segment mode", name)
		}
	}
}

// TestRealGeneratorBorrow: a borrowing generator's figures reach the
// scrape: how far its IDs run ahead of the clock, how many it borrowed,
// its refusals at the fence, and the policy.
func TestRealGeneratorBorrow(t *testing.T) {
	clk := clocktest.NewFake(testNow)
	gen, err := snowflake.NewGenerator(snowflake.Config{Layout: snowflake.DefaultLayout(), WorkerID: 3, Clock: clk, Borrow: true})
	if err != nil {
		t.Fatal(err)
	}
	gen.SetFence(snowflake.UnixMilliOf(testNow.Add(time.Millisecond)))
	m, err := New(Config{Snapshot: liveSnapshot(gen, health.New(nopLog, nil), clk), RollbackPolicy: "borrow"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gen.Next(); err != nil {
		t.Fatal(err)
	}
	clk.StepWall(-1500 * time.Millisecond)
	if _, err := gen.NextN(10); err != nil {
		t.Fatal(err)
	}
	if _, err := gen.NextN(2 * 4096); !errors.Is(err, snowflake.ErrBorrowExhausted) {
		t.Fatalf("a batch past the fence while borrowing: %v, want ErrBorrowExhausted", err)
	}
	ex := scrape(t, m)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		// 10, then the batch's first 2*4096-11 (the rest of the first tick
		// and the fence's tick), reserved and dropped with the error.
		{"snowflaked_ids_borrowed_total", nil, 10 + 2*4096 - 11},
		// the fence's tick, 1ms after the last one before the rollback
		{"snowflaked_id_time_ahead_seconds", nil, 1.501},
		{"snowflaked_generator_refusals_total", []string{"cause", "borrow_exhausted"}, 1},
		{"snowflaked_generator_refusals_total", []string{"cause", "rollback"}, 0},
		{"snowflaked_rollback_policy", []string{"policy", "borrow"}, 1},
		{"snowflaked_transitions_total", []string{"reason", "borrow_exhausted"}, 0},
	} {
		if got := mustFind(t, ex, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if _, err := New(Config{Snapshot: liveSnapshot(gen, health.New(nopLog, nil), clk), RollbackPolicy: "lend"}); !errors.Is(err, errBadConfig) {
		t.Errorf("New with rollback policy lend: %v, want ErrBadConfig", err)
	}
}

// TestPrevHolderFenceWait: the wait for the previous holder's ZooKeeper
// fence is exported with its time left, and prev_holder_fence from 0 in
// the state and transition families before it ever happens; while the
// node waits, it is the reason of the starting state.
func TestPrevHolderFenceWait(t *testing.T) {
	wait := health.ReasonPrevHolderFence
	f := newFixture(t, nil)
	check := f.guard.Check(wait)
	f.snap.PrevHolderWait = 4500 * time.Millisecond
	m := f.m
	ex := scrape(t, m)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"snowflaked_prev_holder_fence_wait_seconds", nil, 4.5},
		{"snowflaked_state_reason", []string{"reason", string(wait)}, 0},
		{"snowflaked_transitions_total", []string{"reason", string(wait)}, 0},
	} {
		if got := mustFind(t, ex, c.name, c.labels...); got != c.want {
			t.Errorf("before the wait: %s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	check.Wait("waiting for the previous holder's ZooKeeper fence")
	ex = scrape(t, m)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"snowflaked_state", []string{"state", "starting"}, 1},
		{"snowflaked_state_reason", []string{"reason", string(wait)}, 1},
		{"snowflaked_state_reason", []string{"reason", "clock_behind_fence"}, 0},
		{"snowflaked_transitions_total", []string{"reason", string(wait)}, 1},
	} {
		if got := mustFind(t, ex, c.name, c.labels...); got != c.want {
			t.Errorf("while waiting: %s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

// TestBuildInfo: snowflaked_build_info is 1 with the node's build version
// (unknown when it has none), the stamped revision and the Go version.
func TestBuildInfo(t *testing.T) {
	tests := []struct {
		name, version, want string
	}{
		{"version set", "v1.4.0-3-gabc1234", "v1.4.0-3-gabc1234"},
		{"version unset", "", "unknown"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			f.snap.BuildVersion = tc.version
			ex := scrape(t, f.m)
			got := ex.samplesOf("snowflaked_build_info")
			if len(got) != 1 {
				t.Fatalf("snowflaked_build_info: %d series, want 1", len(got))
			}
			rev := buildRevision(debug.ReadBuildInfo())
			if v := mustFind(t, ex, "snowflaked_build_info", "version", tc.want, "revision", rev, "goversion", runtime.Version()); v != 1 {
				t.Errorf("snowflaked_build_info = %v, want 1", v)
			}
		})
	}
}

// TestBuildRevision: the revision label from the toolchain's VCS stamp.
func TestBuildRevision(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
	tests := []struct {
		name string
		info *debug.BuildInfo
		ok   bool
		want string
	}{
		{"no build info", nil, false, "unknown"},
		{"not stamped", &debug.BuildInfo{}, true, "unknown"},
		{"stamped", &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "false"}}}, true, rev},
		{"stamped dirty", &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "true"}}}, true, rev + "-dirty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := buildRevision(tc.info, tc.ok); got != tc.want {
				t.Errorf("buildRevision = %q, want %q", got, tc.want)
			}
		})
	}
}
