package node

import (
	"encoding/json"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/clock/clocktest"
	"codeberg.org/snowflaked/snowflaked/tests/ntpharness"
)

// The NTP check is wired to --ntp, --ntp-interval, --ntp-max-offset and
// --ntp-required, measures the node's (injected) clock, and keeps the node
// out of service until one round passes.
func TestRunNTPCheck(t *testing.T) {
	tests := []struct {
		name       string
		offset     time.Duration // the server's clock minus ours
		silent     bool
		required   bool
		wantReady  bool
		wantReason string
	}{
		{name: "in sync", wantReady: true},
		{name: "offset beyond the maximum", offset: 2 * time.Second, wantReason: "ntp_offset"},
		{name: "unreachable, not required", silent: true, wantReady: true},
		{name: "unreachable, required", silent: true, required: true, wantReason: "ntp_unreachable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ntp := ntpharness.StartFake(t)
			ntp.SetOffset(tc.offset)
			ntp.SetSilent(tc.silent)
			cfg := testConfig(t, 3)
			cfg.NTP, cfg.NTPInterval, cfg.NTPMaxOffset, cfg.NTPRequired = ntp.Addr(), 200*time.Millisecond, 500*time.Millisecond, tc.required
			ln := loopbackListener(t)
			addr := ln.Addr().String()
			startRunOn(t, cfg, ln)
			var rep ClockInfo
			waitHTTP(t, addr, "/clock", func(code int, body string) bool {
				return code == http.StatusOK && json.Unmarshal([]byte(body), &rep) == nil && rep.NTP != nil && rep.NTP.Rounds > 0
			})
			if !rep.NTP.Enabled || len(rep.NTP.Servers) != 1 || rep.NTP.Servers[0] != ntp.Addr() {
				t.Errorf("/clock ntp section %+v", rep.NTP)
			}
			if tc.wantReady {
				waitHTTP(t, addr, "/readyz", func(code int, _ string) bool { return code == http.StatusOK })
			} else {
				waitHTTP(t, addr, "/readyz", func(code int, body string) bool {
					return code == http.StatusServiceUnavailable && strings.Contains(body, `"reason":"`+tc.wantReason+`"`)
				})
				if code, body := httpGet(t, addr, "/id"); code != http.StatusServiceUnavailable {
					t.Errorf("/id out of service: %d %s", code, body)
				}
			}
			if tc.offset != 0 {
				_, body := httpGet(t, addr, "/clock")
				if err := json.Unmarshal([]byte(body), &rep); err != nil || rep.NTP.Last == nil ||
					rep.NTP.Last.Offset < tc.offset-200*time.Millisecond || rep.NTP.Last.Offset > tc.offset+200*time.Millisecond {
					t.Errorf("/clock ntp offset: %+v (%v), want about %s", rep.NTP.Last, err, tc.offset)
				}
			}
			// Back in sync: the node returns to service by itself.
			ntp.SetOffset(0)
			ntp.SetSilent(false)
			waitHTTP(t, addr, "/readyz", func(code int, _ string) bool { return code == http.StatusOK })
		})
	}
}

// The watcher sees a wall-clock step back with no traffic at all and takes
// the node out of service (clock_rollback) until the clock is past the last
// issued ID again; its counters show in /clock.
func TestRunWatcherSeesStepBackWithoutTraffic(t *testing.T) {
	clk, addr := startWithOneID(t, 4)
	clk.StepWall(-2 * time.Second)
	waitHTTP(t, addr, "/readyz", func(code int, body string) bool {
		return code == http.StatusServiceUnavailable && strings.Contains(body, `"reason":"clock_rollback"`) && strings.Contains(body, "watcher")
	})
	var rep ClockInfo
	if _, body := httpGet(t, addr, "/clock"); json.Unmarshal([]byte(body), &rep) != nil || rep.Watcher == nil ||
		rep.Watcher.BackwardSteps != 1 || rep.Watcher.LargestBackward < 2*time.Second || rep.Transitions["clock_rollback"] != 1 {
		t.Errorf("/clock after a step back: %s", body)
	}
	clk.Advance(2*time.Second + 10*time.Millisecond)
	waitHTTP(t, addr, "/readyz", func(code int, _ string) bool { return code == http.StatusOK })
}

// A step back that leaves the clock ahead of the last issued ID harms
// nothing: the watcher counts it, and the node stays in service (it used to
// leave for a few microseconds with a false "behind the last issued ID").
func TestRunWatcherStepAheadOfTheLastIDKeepsTheNodeIn(t *testing.T) {
	clk, addr := startWithOneID(t, 5)
	clk.Advance(time.Second)
	clk.StepWall(-300 * time.Millisecond) // still 700ms past the last ID
	var rep ClockInfo
	waitHTTP(t, addr, "/clock", func(_ int, body string) bool {
		return json.Unmarshal([]byte(body), &rep) == nil && rep.Watcher != nil && rep.Watcher.BackwardSteps == 1
	})
	// The watcher's next comparison starts only after its reaction to the
	// step returned.
	checks := rep.Watcher.Checks
	waitHTTP(t, addr, "/clock", func(_ int, body string) bool {
		return json.Unmarshal([]byte(body), &rep) == nil && rep.Watcher != nil && rep.Watcher.Checks > checks
	})
	if n := rep.Transitions["clock_rollback"]; n != 0 {
		t.Fatalf("the node left service %d times for a step that left the clock ahead of every ID (state %s)", n, rep.State)
	}
	if code, body := httpGet(t, addr, "/id"); code != http.StatusOK {
		t.Fatalf("/id after the step: %d %s", code, body)
	}
}

// startWithOneID runs a standalone node with worker ID worker on a fake
// clock, waits for it to serve and takes one ID from it.
func startWithOneID(t *testing.T, worker int64) (*clocktest.Fake, string) {
	t.Helper()
	clk := clocktest.NewFake(time.Now())
	ln := loopbackListener(t)
	addr := ln.Addr().String()
	startRunOn(t, testConfig(t, worker), ln, withClock(clk))
	waitHTTP(t, addr, "/readyz", func(code int, _ string) bool { return code == http.StatusOK })
	if code, body := httpGet(t, addr, "/id"); code != http.StatusOK {
		t.Fatalf("/id: %d %s", code, body)
	}
	return clk, addr
}

// One loop reads the wall and monotonic clocks for both the watcher
// (clock_rollback) and the jump guard (clock_jump): the two run two
// goroutines, that sampler and the loop that asks NTP and the peers about a
// held jump. With no traffic, a forward jump beyond --fence-ahead is still
// held and its undo seen, and a step back still trips clock_rollback.
func TestRunOneClockSampler(t *testing.T) {
	clk, addr := startWithOneID(t, 6)
	const want = 2
	var got []string
	deadline := time.Now().Add(5 * time.Second)
	for got = clockLoops(); len(got) != want && time.Now().Before(deadline); got = clockLoops() {
		time.Sleep(10 * time.Millisecond)
	}
	if len(got) != want {
		t.Fatalf("%d goroutines of the watcher and the jump guard, want %d:\n%s", len(got), want, strings.Join(got, "\n\n"))
	}
	steps := []struct {
		name   string
		do     func()
		code   int
		reason string
	}{
		{"a jump beyond the headroom is held", func() { clk.StepWall(time.Hour) }, http.StatusServiceUnavailable, "clock_jump"},
		{"its undo is seen", func() { clk.StepWall(-time.Hour) }, http.StatusOK, ""},
		{"a step back trips clock_rollback", func() { clk.StepWall(-2 * time.Second) }, http.StatusServiceUnavailable, "clock_rollback"},
		{"the clock past the last ID again", func() { clk.Advance(2*time.Second + 10*time.Millisecond) }, http.StatusOK, ""},
	}
	for _, st := range steps {
		st.do()
		t.Log(st.name)
		waitHTTP(t, addr, "/readyz", func(code int, body string) bool {
			return code == st.code && (st.reason == "" || strings.Contains(body, `"reason":"`+st.reason+`"`))
		})
	}
}

// clockLoops returns the stacks of the goroutines that run the watcher's,
// the sampler's or the jump guard's loops.
func clockLoops() []string {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "clockguard.(*Watcher).Run") || strings.Contains(g, "clockguard.(*Sampler).Run") ||
			strings.Contains(g, "clockguard.(*JumpGuard).Run") {
			out = append(out, g)
		}
	}
	return out
}
