package e2e

import (
	"net/http"
	"syscall"
	"testing"
	"time"
)

// An operator who sets a rolled-back clock right (the step forward brings
// the wall clock back to where the monotonic clock expects it) does not
// take the node out: no clock_jump, and no refusal beyond the rollback's
// own, with either rollback policy. Before, the jump guard held the
// correction as a forward jump for a minute (no NTP or peers to confirm
// it): with borrow, about 1,000 refusals in 3 s after a rollback it had
// ridden out without one.
func TestIntegration_ChaosCorrectedRollbackIsNotAJump(t *testing.T) {
	const (
		step      = 8 * time.Second        // the step back, and its correction
		corrected = 2 * time.Second        // how long the clock stays back
		after     = 3 * time.Second        // load after the correction
		grace     = 500 * time.Millisecond // answers in flight at the correction
	)
	tests := []struct {
		policy string
		// refusalsInRollback: the rollback's own refusals (leave: the
		// node is out until the clock passes the last issued ID).
		refusalsInRollback bool
	}{
		{"borrow", false},
		{"leave", true},
	}
	for _, tc := range tests {
		t.Run(tc.policy, func(t *testing.T) {
			p := startNode(t, binChaos, nodeArgs(t.TempDir(), 9, "--rollback-policy", tc.policy))
			p.waitReadyz(http.StatusOK, readyTimeout)
			load := startLoad(p.addr)
			for _, c := range load {
				c.waitFor(t, 100)
			}
			p.setOffset("-" + step.String())
			time.Sleep(corrected)
			p.setOffset("0")
			correctedAt := time.Now()
			back, _ := p.waitReadyz(http.StatusOK, 5*time.Second)
			time.Sleep(after)

			var lists [][]int64
			var inRollback, afterCorrection int
			var late []time.Time
			for _, c := range load {
				lists = append(lists, c.finish(t))
				if c.errs > 0 {
					t.Errorf("transport errors: %d (%v)", c.errs, c.firstErr)
				}
				for _, at := range c.errAt {
					if at.After(correctedAt.Add(grace)) {
						afterCorrection++
						late = append(late, at)
					} else {
						inRollback++
					}
				}
				if len(c.bodies) > 0 {
					t.Logf("first refusals: %q", c.bodies)
				}
			}
			n := checkIDs(t, lists...)
			jumps := metricValue(t, p, series("snowflaked_transitions_total", "reason", "clock_jump"))
			t.Logf("%s: %d IDs; %d refusals during the %s rollback, %d after its correction; /readyz 200 %s after it; clock_jump transitions %v",
				tc.policy, n, inRollback, corrected, afterCorrection, back.Round(time.Millisecond), jumps)
			if jumps != 0 {
				t.Errorf("the correction took the node out with clock_jump (%v transitions)", jumps)
			}
			if afterCorrection > 0 {
				t.Errorf("%d refusals more than %s after the correction, the first at +%s", afterCorrection, grace, late[0].Sub(correctedAt).Round(time.Millisecond))
			}
			if !tc.refusalsInRollback && inRollback > 0 {
				t.Errorf("%d refusals during a rollback borrow rides out", inRollback)
			}
			if tc.refusalsInRollback && inRollback == 0 {
				t.Errorf("no refusal during the rollback: the step back was not seen (the test shows nothing)")
			}
			if code, body := p.get("/readyz"); code != http.StatusOK {
				t.Errorf("/readyz after the correction: %d %s", code, body)
			}
			if _, ok := p.FindLog("the clock stepped forward back to the time the monotonic clock expects: a correction of an earlier step back, not a jump"); !ok {
				t.Errorf("no log line for the correction")
			}
			p.signal(syscall.SIGTERM)
			if code := p.exitCode(); code != 0 {
				t.Errorf("exit %d", code)
			}
		})
	}
}
