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
	s := &overlapSchedule{
		h: h, t: t, nodes: nodes,
		rng:       rand.New(rand.NewPCG(h.seed, 0x6f7665726c6170)), // "overlap"
		offsets:   make([]time.Duration, len(nodes)),
		restartAt: make([]time.Time, len(nodes)),
		epochs:    make([]atomic.Int64, len(nodes)),
		zkFault:   &leaderFault{t: t, ens: ens},
		counts:    map[string]int{},
	}
	start := time.Now()
	for time.Since(start) < duration {
		s.endDueFaults()
		time.Sleep(time.Duration(200+s.rng.IntN(800)) * time.Millisecond) // the schedule's pace
		s.injectOne()
	}
	t.Logf("overlapping faults over %s (%s=%d): %v", duration, SeedEnv, h.seed, s.counts)

	// End every fault, then every node must come back by itself.
	ended := time.Now()
	s.endAll()
	s.returns.Wait()
	for _, n := range nodes {
		if d, ok := pollReady(n, overlapReturnBound); !ok {
			t.Errorf("node %s not back in service within %s of the last fault's end (%s)", n.name, overlapReturnBound, d)
		}
	}
	h.sum.Measure(MeasureOverlapEnd, time.Since(ended), "all faults ended")
	c.warmUp(nodes...)
	c.finish()
}

// overlapSchedule is the state of overlappingFaults' seeded schedule.
type overlapSchedule struct {
	h         *harness
	t         *testing.T
	nodes     []*node
	rng       *rand.Rand
	offsets   []time.Duration
	restartAt []time.Time    // non-zero: killed, restart then
	epochs    []atomic.Int64 // bumped by every fault on a node
	zkFault   *leaderFault
	returns   sync.WaitGroup
	counts    map[string]int
}

// measureReturn records how long node i takes to be in service again
// since since, unless another fault hits it meanwhile (then that
// fault's own measurement counts).
func (s *overlapSchedule) measureReturn(kind, what string, since time.Time, idx ...int) {
	for _, i := range idx {
		n, epoch := s.nodes[i], s.epochs[i].Load()
		s.returns.Go(func() {
			deadline := time.Now().Add(overlapReturnBound)
			for time.Now().Before(deadline) {
				if s.epochs[i].Load() != epoch {
					return
				}
				if code, _, err := n.readyz(); err == nil && code == http.StatusOK {
					s.h.sum.Measure(kind, time.Since(since), what)
					return
				}
				time.Sleep(fastPoll)
			}
			if s.epochs[i].Load() == epoch {
				s.t.Errorf("%s: node %s not back in service within %s", what, n.name, overlapReturnBound)
			}
		})
	}
}

// endDueFaults ends the faults whose time has come: restarts of killed
// nodes and of the ZooKeeper server, whatever else is going on.
func (s *overlapSchedule) endDueFaults() {
	for i, at := range s.restartAt {
		if at.IsZero() || time.Now().Before(at) {
			continue
		}
		s.offsets[i] = 0
		var env []string
		if s.rng.IntN(3) == 0 { // a rollback during the restart: the clock starts behind
			s.offsets[i] = -time.Duration(500+s.rng.IntN(1500)) * time.Millisecond
			env = []string{chaosOffsetEnv + "=" + s.offsets[i].String()}
		}
		s.epochs[i].Add(1)
		began := time.Now()
		s.nodes[i].restart(env)
		s.restartAt[i] = time.Time{}
		s.measureReturn(MeasureOverlapKill, fmt.Sprintf("node %s restarted with offset %s", s.nodes[i].name, s.offsets[i]), began, i)
		s.counts["restart"]++
	}
	if s.zkFault.restartDue() {
		var up []int
		for i := range s.nodes {
			if s.restartAt[i].IsZero() && s.offsets[i] == 0 {
				up = append(up, i)
			}
		}
		s.measureReturn(MeasureOverlapLeader, "ZooKeeper server restarted", time.Now(), up...)
		s.counts["zookeeper restart"]++
	}
}

// injectOne draws the next fault and its node and injects it, unless it
// would change nothing or an election is under way.
func (s *overlapSchedule) injectOne() {
	i := s.rng.IntN(len(s.nodes))
	n := s.nodes[i]
	killed := pending(s.restartAt)
	switch k := s.rng.IntN(20); {
	case k < 11 && s.restartAt[i].IsZero(): // a clock fault: rollback, forward jump (beyond the fence headroom too) or reset
		next := time.Duration(s.rng.IntN(7000)-2000) * time.Millisecond // -2s..+5s
		if s.rng.IntN(3) == 0 {
			next = 0
		}
		if next == s.offsets[i] {
			return
		}
		s.epochs[i].Add(1)
		n.setOffset(next)
		s.h.sum.Injected(next - s.offsets[i])
		if next == 0 {
			s.measureReturn(MeasureOverlapClock, fmt.Sprintf("node %s offset %s to 0", n.name, s.offsets[i]), time.Now(), i)
		}
		s.offsets[i] = next
		s.counts["clock"]++
	case k < 15 && s.restartAt[i].IsZero() && killed < 2: // kill -9; restarted 0.2s-3s later
		s.epochs[i].Add(1)
		n.kill9()
		s.h.sum.Killed()
		s.restartAt[i] = time.Now().Add(time.Duration(200+s.rng.IntN(2800)) * time.Millisecond)
		s.counts["kill -9"]++
	case k < 18 && !s.zkFault.isDown(): // kill the ZooKeeper leader; restarted 0.5s-4s later
		if !s.zkFault.kill(s.rng) {
			return // an election is under way: the fault already overlaps one
		}
		s.counts["zookeeper leader kill"]++
	}
}

// endAll ends every fault now: the ZooKeeper server and killed nodes
// restart, clocks go back to 0.
func (s *overlapSchedule) endAll() {
	s.zkFault.end()
	for i, n := range s.nodes {
		s.epochs[i].Add(1) // measured below, all together
		switch {
		case !s.restartAt[i].IsZero():
			n.restart(nil)
		case s.offsets[i] != 0:
			n.setOffset(0)
			s.h.sum.Injected(-s.offsets[i])
		}
	}
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
