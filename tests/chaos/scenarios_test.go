//go:build chaos

package chaos

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/tests/ntpharness"
)

// TestIntegration_Chaos runs every scenario against one real ZooKeeper, each
// in its own snowflaked cluster of real chaos-build processes under load,
// and prints the run's summary (also to $CHAOS_SUMMARY when set).
func TestIntegration_Chaos(t *testing.T) {
	long := longRun(t)
	seed, err := Seed()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s=%d (set it to replay the random schedule); %s=%v", SeedEnv, seed, LongEnv, long)
	mode := "short"
	if long {
		mode = "long"
	}
	sum := NewSummary(mode, seed)
	t.Cleanup(func() { // also when ZooKeeper is missing and the test skips
		t.Log("\n" + sum.String())
		if path, err := sum.WriteFile(); err != nil {
			t.Error(err)
		} else if path != "" {
			t.Logf("summary written to %s", path)
		}
	})
	h := newHarness(t, long, seed, sum)
	for _, sc := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"rollback_within_tolerance", h.rollbackWithinTolerance},
		{"rollback_5s_one_of_three", h.rollbackBeyondTolerance},
		{"random_schedule", h.randomSchedule},
		{"clock_off_peers_at_start", h.clockOffPeersAtStart},
		{"ntp_drift", h.ntpDrift},
		{"kill9_mid_rollback", h.kill9MidRollback},
		{"overlapping_faults", h.overlappingFaults},
		{"segments_overlapping_faults", h.segmentsOverlappingFaults},
	} {
		t.Run(sc.name, sc.run)
	}
}

// pick returns the short or the long variant.
func pick[T any](h *harness, short, long T) T {
	if h.long {
		return long
	}
	return short
}

// othersThan returns nodes without x, in their order.
func othersThan(x *node, nodes []*node) []*node {
	var others []*node
	for _, n := range nodes {
		if n != x {
			others = append(others, n)
		}
	}
	return others
}

// watchReadyz polls /readyz of nodes every 5ms for d and returns the
// non-200 answers seen ("node: status reason").
func watchReadyz(d time.Duration, nodes ...*node) []string {
	var gaps []string
	end := time.Now().Add(d)
	for range int(d/(5*time.Millisecond)) + 1 {
		for _, n := range nodes {
			code, reason, err := n.readyz()
			if err != nil || code != http.StatusOK {
				gaps = append(gaps, fmt.Sprintf("%s: %d %s %v", n.name, code, reason, err))
			}
		}
		if time.Now().After(end) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	return gaps
}

// rollbackWithinTolerance: steps of 2ms back (the tolerance is 5ms), again
// and again on every node under load: no error, /readyz never 503, the alive
// znodes never go.
func (h *harness) rollbackWithinTolerance(t *testing.T) {
	c := h.newCluster(t, "within-tolerance")
	nodes := c.startReady("a", "b", "c")
	c.startLoad(nodes...)
	c.warmUp(nodes...)
	before := c.counts(nodes...)
	since := time.Now()

	const step = -2 * time.Millisecond
	steps := pick(h, 15, 150)
	offsets := map[string]time.Duration{}
	var gaps []string
	for i := range steps {
		n := nodes[i%len(nodes)]
		offsets[n.name] += step
		n.setOffset(offsets[n.name])
		h.sum.Injected(step)
		gaps = append(gaps, watchReadyz(150*time.Millisecond, nodes...)...)
	}
	t.Logf("%d rollbacks of %s in %s; final offsets %v", steps, -step, time.Since(since).Round(time.Millisecond), offsets)
	if len(gaps) > 0 {
		t.Errorf("/readyz left 200 during rollbacks within tolerance (%d times), e.g. %s", len(gaps), gaps[0])
	}
	c.expectNoErrors("rollbacks within tolerance", before, nodes...)
	for _, n := range nodes {
		if at, gone := n.alive.first(false, since); gone {
			t.Errorf("node %s: alive znode deleted at %s", n.name, at.Sub(since))
		}
	}
	c.finish()
}

// rollbackBeyondTolerance: a 5s rollback on one node of three, with no
// traffic to it: out of service (/readyz 503, alive znode gone) within
// leaveBound, the others serve without an error, and it returns by itself
// once its clock passes its last issued ID.
func (h *harness) rollbackBeyondTolerance(t *testing.T) {
	c := h.newCluster(t, "rollback-5s")
	nodes := c.startReady("a", "b", "c")
	load := c.startLoad(nodes...)
	c.warmUp(nodes...)

	const rollback = -5 * time.Second
	rounds := pick(h, 1, 3)
	for r := range rounds {
		x := nodes[r%len(nodes)]
		others := othersThan(x, nodes)
		what := fmt.Sprintf("round %d node %s", r, x.name)
		if !x.alive.present() {
			t.Fatalf("%s: alive znode absent before the rollback", what)
		}
		if err := load.Pause(x.name); err != nil {
			t.Fatal(err)
		}
		before := c.counts(others...)

		sent := x.setOffset(rollback)
		h.sum.Injected(rollback)
		leave, reason := x.waitReadyz(http.StatusServiceUnavailable, sent, 10*time.Second)
		gone := x.alive.wait(t, false, sent, 10*time.Second)
		report, err := x.clock()
		if err != nil {
			t.Fatal(err)
		}
		clockAt := time.Now()
		behind := time.Duration(report.LastIssuedMs-report.NowMs) * time.Millisecond
		t.Logf("%s: /readyz 503 (%s) %s and alive znode gone %s after the POST; clock %s behind its last issued ID",
			what, reason, leave.Round(100*time.Microsecond), gone.Round(100*time.Microsecond), behind)
		h.sum.Measure(MeasureLeave, leave, what)
		h.sum.Measure(MeasureZnodeGone, gone, what)
		if reason != string(health.ReasonClockRollback) {
			t.Errorf("%s: /readyz reason %q, want %s", what, reason, health.ReasonClockRollback)
		}
		if leave > leaveBound || gone > leaveBound {
			t.Errorf("%s: out of service after %s (/readyz) and %s (alive znode), want both within %s", what, leave, gone, leaveBound)
		}

		// Traffic again: it answers 503s with a reason until it returns.
		if err := load.Resume(x.name); err != nil {
			t.Fatal(err)
		}
		back, _ := x.waitReadyz(http.StatusOK, sent, -rollback+readyTimeout)
		backAt := sent.Add(back)
		present := x.alive.wait(t, true, sent, 10*time.Second)
		t.Logf("%s: back in service %s after the POST (alive znode %s)", what, back.Round(time.Millisecond), present.Round(time.Millisecond))
		h.sum.Measure(MeasureReturn, back, what)
		// Not before its clock passed the last issued ID (ms rounding aside).
		if earliest := clockAt.Add(behind - 2*time.Millisecond); backAt.Before(earliest) {
			t.Errorf("%s: back in service %s before its clock passed its last issued ID", what, earliest.Sub(backAt))
		}
		c.expectNoErrors(what+": the other nodes", before, others...)

		// The clock is put right: a forward jump of 5s.
		x.setOffset(0)
		h.sum.Injected(-rollback)
		x.waitReadyz(http.StatusOK, time.Now(), readyTimeout)
		c.warmUp(x)
	}
	c.finish()
}

// randomSchedule: rollbacks (within and beyond tolerance) and forward jumps
// on random nodes at random times, from a seed printed in the log.
func (h *harness) randomSchedule(t *testing.T) {
	c := h.newCluster(t, "random")
	nodes := c.startReady("a", "b", "c")
	c.startLoad(nodes...)
	c.warmUp(nodes...)

	cfg := ScheduleConfig{
		Nodes: len(nodes), Duration: pick(h, 6*time.Second, 60*time.Second),
		MinGap: 100 * time.Millisecond, MaxGap: 500 * time.Millisecond, MaxOffset: 2 * time.Second,
	}
	faults, err := NewSchedule(h.seed, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d faults from %s=%d, config %+v", len(faults), SeedEnv, h.seed, cfg)
	start := time.Now()
	for i, f := range faults {
		if wait := time.Until(start.Add(f.At)); wait > 0 {
			time.Sleep(wait) // the schedule's pace, not a wait for a condition
		}
		nodes[f.Node].setOffset(f.Offset)
		h.sum.Injected(f.Step)
		if i < 20 || !h.long {
			t.Logf("fault %d: %s", i, f)
		}
	}
	// Every offset is back to 0: each node returns once its clock passed
	// the IDs it issued while ahead.
	for _, n := range nodes {
		n.waitReadyz(http.StatusOK, time.Now(), cfg.MaxOffset+readyTimeout)
	}
	c.warmUp(nodes...)
	for _, n := range nodes {
		if tr := c.checker.Counts(n.name).Transport; tr != 0 {
			t.Errorf("node %s: %d requests without an answer (no node was killed)", n.name, tr)
		}
	}
	c.finish()
}

// clockOffPeersAtStart: a node whose clock is 5s behind its peers when it
// starts refuses to enter service (peer_offset), never publishes its alive
// znode and issues nothing; once its clock agrees it enters service.
func (h *harness) clockOffPeersAtStart(t *testing.T) {
	c := h.newCluster(t, "peers-at-start")
	nodes := c.startReady("a", "b", "c")
	c.startLoad(nodes...)
	c.warmUp(nodes...)
	before := c.counts(nodes...)

	d := c.startNode("d", nodeOpts{
		extra: []string{"--peer-interval", "300ms", "--peer-max-offset", "1s"}, // overrides the common 1h and 1m
		env:   []string{chaosOffsetEnv + "=-5s"},
	})
	since := time.Now()
	for _, m := range d.p.LogLines() {
		if m["variable"] == chaosOffsetEnv {
			t.Errorf("node d warns about %s, which its build reads: %v", chaosOffsetEnv, m)
		}
	}
	c.startLoad(d)
	waitFor(t, readyTimeout, "node d refuses with reason peer_offset", func() bool {
		code, reason, err := d.readyz()
		if err == nil && code == http.StatusOK {
			t.Fatalf("node d entered service with its clock 5s off its peers")
		}
		return err == nil && reason == string(health.ReasonPeerOffset)
	})
	watch := pick(h, 1500*time.Millisecond, 5*time.Second)
	for _, g := range watchReadyz(watch, d) {
		if !strings.Contains(g, string(health.ReasonPeerOffset)) {
			t.Errorf("node d: /readyz %s, want 503 peer_offset throughout", g)
		}
	}
	refused := time.Since(since)
	h.sum.Measure(MeasureRefusal, refused, "node d 5s behind 3 peers")
	if at, ok := d.alive.first(true, time.Time{}); ok {
		t.Errorf("node d: alive znode created %s after start while refusing", at.Sub(since))
	}
	if got := c.checker.Counts("d"); got.OK != 0 || got.Unavailable[string(health.ReasonPeerOffset)] == 0 {
		t.Errorf("node d while refusing: %s, want only 503 peer_offset", got)
	}
	t.Logf("node d refused for %s: %s", refused.Round(time.Millisecond), c.checker.Counts("d"))

	fixed := d.setOffset(0)
	back, _ := d.waitReadyz(http.StatusOK, fixed, readyTimeout)
	d.alive.wait(t, true, fixed, 10*time.Second)
	h.sum.Measure(MeasureReturnPeer, back, "node d")
	t.Logf("node d in service %s after its clock was put right", back.Round(time.Millisecond))
	c.warmUp(d)
	c.expectNoErrors("a node off its peers starting", before, nodes...)
	c.finish()
}

// ntpDrift: a node checked against a (fake) NTP server every 200ms drifts
// ahead step by step; beyond --ntp-max-offset (500ms) it leaves service
// (ntp_offset), the others serve on, and it returns when the NTP server
// agrees with it again.
func (h *harness) ntpDrift(t *testing.T) {
	fake := ntpharness.StartFake(t)
	c := h.newCluster(t, "ntp")
	nodes := c.startReady("a", "b")
	e := c.startNode("e", nodeOpts{extra: []string{"--ntp", fake.Addr(), "--ntp-interval", "200ms"}})
	e.waitReadyz(http.StatusOK, time.Now(), readyTimeout)
	all := append(nodes, e)
	c.startLoad(all...)
	c.warmUp(all...)

	const step, maxDrift = 100 * time.Millisecond, 1500 * time.Millisecond
	base := time.Duration(0) // node e and the NTP server agree at this offset
	rounds := pick(h, 1, 3)
	for r := range rounds {
		what := fmt.Sprintf("round %d", r)
		before := c.counts(nodes...)
		var left, leftAt time.Duration
		for drift := step; drift <= maxDrift && leftAt == 0; drift += step {
			sent := e.setOffset(base + drift)
			h.sum.Injected(step)
			// An NTP check runs every 200ms: watch a little longer.
			for range 1000 { // bounded; the window ends it first
				code, reason, err := e.readyz()
				if err == nil && code == http.StatusServiceUnavailable {
					if reason != string(health.ReasonNTPOffset) {
						t.Errorf("%s: node e out of service for %q, want ntp_offset", what, reason)
					}
					left, leftAt = time.Since(sent), drift
					break
				}
				if err != nil || code != http.StatusOK {
					t.Errorf("%s: node e /readyz %d %v", what, code, err)
				}
				if time.Since(sent) > 300*time.Millisecond {
					break
				}
				time.Sleep(fastPoll)
			}
		}
		if leftAt == 0 {
			t.Fatalf("%s: node e still in service %s off its NTP server", what, maxDrift)
		}
		if leftAt <= 400*time.Millisecond {
			t.Errorf("%s: node e left service at a drift of %s, within --ntp-max-offset 500ms", what, leftAt)
		}
		gone := e.alive.wait(t, false, time.Now().Add(-left), 10*time.Second)
		h.sum.Measure(MeasureLeaveNTP, left, fmt.Sprintf("%s at a drift of %s", what, leftAt))
		t.Logf("%s: node e left service at a drift of %s: /readyz 503 %s and alive znode gone %s after that step",
			what, leftAt, left.Round(time.Millisecond), gone.Round(time.Millisecond))

		agreed := time.Now()
		base += leftAt
		fake.SetOffset(base)
		back, _ := e.waitReadyz(http.StatusOK, agreed, readyTimeout)
		e.alive.wait(t, true, agreed, 10*time.Second)
		h.sum.Measure(MeasureReturnNTP, back, what)
		t.Logf("%s: node e back in service %s after the NTP server agreed", what, back.Round(time.Millisecond))
		c.warmUp(e)
		c.expectNoErrors(what+": nodes without NTP", before, nodes...)
	}
	c.finish()
}

// kill9MidRollback: a node is killed with SIGKILL while out of service for
// a rollback and restarted (its clock still behind, or put right): it never
// issues an ID at or below one issued before the kill.
func (h *harness) kill9MidRollback(t *testing.T) {
	c := h.newCluster(t, "kill9")
	// A node restarted with its clock still 3s behind would refuse service
	// for its peers' sake (peer_offset, see clockOffPeersAtStart); a wide
	// peer tolerance lets this scenario test the time fence alone.
	c.extra = []string{"--peer-max-offset", "10s"}
	nodes := c.startReady("a", "b", "c")
	c.startLoad(nodes...)
	c.warmUp(nodes...)

	const rollback = -3 * time.Second
	rounds := pick(h, 2, 4)
	for r := range rounds {
		x := nodes[r%len(nodes)]
		others := othersThan(x, nodes)
		behindAtRestart := r%2 == 0 // even rounds: the clock is still behind after the crash
		what := fmt.Sprintf("round %d node %s (clock behind at restart: %v)", r, x.name, behindAtRestart)
		before := c.counts(others...)
		sent := x.setOffset(rollback)
		h.sum.Injected(rollback)
		x.waitReadyz(http.StatusServiceUnavailable, sent, 10*time.Second)
		x.kill9()
		h.sum.Killed()
		t.Logf("%s: killed %s after the rollback, mid-rollback", what, time.Since(sent).Round(time.Millisecond))

		var env []string
		if behindAtRestart {
			env = []string{fmt.Sprintf("%s=%s", chaosOffsetEnv, rollback)}
		}
		restarted := time.Now()
		x.restart(env)
		back, reason := x.waitReadyz(http.StatusOK, restarted, -rollback+zkSession+readyTimeout)
		h.sum.Measure(MeasureRestart, back, what)
		t.Logf("%s: in service %s after the restart (out of service before for %q)", what, back.Round(time.Millisecond), reason)
		c.warmUp(x)
		if behindAtRestart {
			// Put right: a forward jump as long as the rollback, then a few
			// 503 fence_reached until the fence is moved ahead again.
			x.setOffset(0)
			h.sum.Injected(-rollback)
			x.waitReadyz(http.StatusOK, time.Now(), readyTimeout)
			c.warmUp(x)
		}
		c.expectNoErrors(what+": the other nodes", before, others...)
	}
	c.finish()
}
