//go:build chaos

package chaos

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// overlapReturnBound is how long a node may take to return to service once
// the faults touching it have ended, whatever else is going on: a clock
// that was ahead catching up (at most the largest offset, 2s), a restart's
// start fence (--fence-ahead, 3s) and stale lease, a ZooKeeper election,
// and the rounds of the checks.
const overlapReturnBound = 20 * time.Second

// overlappingFaults: a 3-server ZooKeeper ensemble and three nodes
// under load, with a seeded schedule where kill -9 restarts (some with the
// clock off at start), ZooKeeper leader restarts, rollbacks and forward
// jumps overlap: a fault never waits for the previous one to heal. Every
// node must return to service by itself within overlapReturnBound of the
// faults touching it ending, and the checker must find no duplicate and no
// undocumented 503 among everything issued.
func (h *harness) overlappingFaults(t *testing.T) {
	ens := zkharness.StartEnsemble(t, 3)
	c := h.newCluster(t, "overlap")
	c.zk, c.obs = ens, observe(t, ens)
	nodes := c.startReady("a", "b", "c")
	c.startLoad(nodes...)
	c.warmUp(nodes...)

	duration := pick(h, 15*time.Second, 5*time.Minute)
	rng := rand.New(rand.NewPCG(h.seed, 0x6f7665726c6170)) // "overlap"
	offsets := make([]time.Duration, len(nodes))
	restartAt := make([]time.Time, len(nodes)) // non-zero: killed, restart then
	epochs := make([]atomic.Int64, len(nodes)) // bumped by every fault on a node
	zkFault := &leaderFault{t: t, ens: ens}
	var returns sync.WaitGroup
	// measureReturn records how long node i takes to be in service again
	// since since, unless another fault hits it meanwhile (then that
	// fault's own measurement counts).
	measureReturn := func(kind, what string, since time.Time, idx ...int) {
		for _, i := range idx {
			n, epoch := nodes[i], epochs[i].Load()
			returns.Go(func() {
				deadline := time.Now().Add(overlapReturnBound)
				for time.Now().Before(deadline) {
					if epochs[i].Load() != epoch {
						return
					}
					if code, _, err := n.readyz(); err == nil && code == http.StatusOK {
						h.sum.Measure(kind, time.Since(since), what)
						return
					}
					time.Sleep(fastPoll)
				}
				if epochs[i].Load() == epoch {
					t.Errorf("%s: node %s not back in service within %s", what, n.name, overlapReturnBound)
				}
			})
		}
	}
	counts := map[string]int{}
	start := time.Now()
	for time.Since(start) < duration {
		// Faults that end now: restarts of killed nodes and of the
		// ZooKeeper server, whatever else is going on.
		for i, at := range restartAt {
			if at.IsZero() || time.Now().Before(at) {
				continue
			}
			offsets[i] = 0
			var env []string
			if rng.IntN(3) == 0 { // a rollback during the restart: the clock starts behind
				offsets[i] = -time.Duration(500+rng.IntN(1500)) * time.Millisecond
				env = []string{chaosOffsetEnv + "=" + offsets[i].String()}
			}
			epochs[i].Add(1)
			began := time.Now()
			nodes[i].restart(env)
			restartAt[i] = time.Time{}
			measureReturn(MeasureOverlapKill, fmt.Sprintf("node %s restarted with offset %s", nodes[i].name, offsets[i]), began, i)
			counts["restart"]++
		}
		if zkFault.restartDue() {
			var up []int
			for i := range nodes {
				if restartAt[i].IsZero() && offsets[i] == 0 {
					up = append(up, i)
				}
			}
			measureReturn(MeasureOverlapLeader, "ZooKeeper server restarted", time.Now(), up...)
			counts["zookeeper restart"]++
		}

		time.Sleep(time.Duration(200+rng.IntN(800)) * time.Millisecond) // the schedule's pace
		i := rng.IntN(len(nodes))
		n := nodes[i]
		killed := pending(restartAt)
		switch k := rng.IntN(20); {
		case k < 11 && restartAt[i].IsZero(): // a clock fault: rollback, forward jump (beyond the fence headroom too) or reset
			next := time.Duration(rng.IntN(7000)-2000) * time.Millisecond // -2s..+5s
			if rng.IntN(3) == 0 {
				next = 0
			}
			if next == offsets[i] {
				continue
			}
			epochs[i].Add(1)
			n.setOffset(next)
			h.sum.Injected(next - offsets[i])
			if next == 0 {
				measureReturn(MeasureOverlapClock, fmt.Sprintf("node %s offset %s to 0", n.name, offsets[i]), time.Now(), i)
			}
			offsets[i] = next
			counts["clock"]++
		case k < 15 && restartAt[i].IsZero() && killed < 2: // kill -9; restarted 0.2s-3s later
			epochs[i].Add(1)
			n.kill9()
			h.sum.Killed()
			restartAt[i] = time.Now().Add(time.Duration(200+rng.IntN(2800)) * time.Millisecond)
			counts["kill -9"]++
		case k < 18 && !zkFault.isDown(): // kill the ZooKeeper leader; restarted 0.5s-4s later
			if !zkFault.kill(rng) {
				continue // an election is under way: the fault already overlaps one
			}
			counts["zookeeper leader kill"]++
		}
	}
	t.Logf("overlapping faults over %s (%s=%d): %v", duration, SeedEnv, h.seed, counts)

	// End every fault, then every node must come back by itself.
	ended := time.Now()
	zkFault.end()
	for i, n := range nodes {
		epochs[i].Add(1) // measured below, all together
		switch {
		case !restartAt[i].IsZero():
			n.restart(nil)
		case offsets[i] != 0:
			n.setOffset(0)
			h.sum.Injected(-offsets[i])
		}
	}
	returns.Wait()
	for _, n := range nodes {
		if d, ok := pollReady(n, overlapReturnBound); !ok {
			t.Errorf("node %s not back in service within %s of the last fault's end (%s)", n.name, overlapReturnBound, d)
		}
	}
	h.sum.Measure(MeasureOverlapEnd, time.Since(ended), "all faults ended")
	c.warmUp(nodes...)
	c.finish()
}

// pollReady polls /readyz until 200 or timeout; on failure it says what it
// saw last.
func pollReady(n *node, timeout time.Duration) (string, bool) {
	deadline := time.Now().Add(timeout)
	last := ""
	for range int(timeout/fastPoll) + 1 {
		code, reason, err := n.readyz()
		if err == nil && code == http.StatusOK {
			return "", true
		}
		last = fmt.Sprintf("%d %s %v", code, reason, err)
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(fastPoll)
	}
	return last, false
}
