package node

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
)

// TestSimulation_Scale runs a cluster of 1,024 whole nodes (node.Run, as
// the snowflake simulation does: claim, cache file, fence keeper,
// renewals, recycling, clock guard with its peer check, segment mode's
// session, the HTTP handler) and a reference cluster of 64 against the
// in-memory ZooKeeper in virtual time, and measures what each node asks
// of ZooKeeper and of its peers, phase by phase:
//
//  1. mass start: every node starts at once; the requests each node key
//     sends from its start until it is in service;
//  2. steady: ZooKeeper requests per node per virtual second over
//     scaleSteadyFor, and the peers each peer check round asks (/time
//     exchanges) per node;
//  3. rolling restart: n/16 nodes, one after another, each stopped
//     cleanly and started again on its disk; the requests of each from its
//     stop until it is back in service;
//  4. recycling: n/4 nodes stop, recycle-after passes, and n/4 new node
//     keys start at once: each must take over a worker ID; the reads of
//     each from its start until it is in service.
//
// After each phase every live node issues IDs through its handler: none
// twice (simIssued), distinct worker IDs. The per-node figures at 1,024
// must stay within the factors below of those at 64: a node's cost must
// not grow with the cluster. SIM_SCALE_N=64,256 sets the sizes (the first
// is the reference; one size checks no factor); under the race detector
// one cluster of 16 runs, without the factors.
//
// The peers' advertised addresses have no listener: every /time exchange
// a round tries fails at once and counts as asked (the check's
// PeerSnapshot.UnreachablePeers).
//
// The figures are logged (go test -v -run TestSimulation_Scale ./node/
// shows them). Under the race detector (go test -race ./...) one cluster
// of 16 runs, without the factors; make test runs the full sizes without
// it.
func TestSimulation_Scale(t *testing.T) {
	sizes := scaleSizes(t)
	figs := make([]scaleFigures, 0, len(sizes))
	for _, n := range sizes {
		f, err := runScaleSim(t, n)
		if err != nil {
			t.Fatalf("%d nodes: %v", n, err)
		}
		t.Logf("%s", f)
		figs = append(figs, f)
	}
	for _, f := range figs {
		checkRecycleReads(t, f)
	}
	if len(figs) < 2 {
		return
	}
	small, large := figs[0], figs[len(figs)-1]
	for _, c := range scaleChecks(small, large) {
		if c.large > c.factor*c.small {
			t.Errorf("%s grows with the cluster: %.2f at %d nodes, %.2f at %d (%.2f×; at most %.2f×)",
				c.name, c.small, small.n, c.large, large.n, c.large/max(c.small, 1e-9), c.factor)
		}
	}
}

// The factors the figures at the large size may reach over the small
// size's (per node or per key), and the bound on a recycling key's reads.
const (
	// scaleSteadyGrowth: ZooKeeper requests per node per virtual second in
	// steady service. A node's own renewals and reports do not depend on n
	// and the peer list comes by watch (no listing of alive/ per round),
	// so the rate must stay flat; 1.3 is room for the watch events.
	scaleSteadyGrowth = 1.3
	// scalePeerGrowth: peers asked for their time per node per peer check
	// round. The check asks a sample (about 12), not every peer.
	scalePeerGrowth = 1.3
	// scaleStartGrowth: ZooKeeper requests per node from its start until
	// it is in service, all starting at once. The claim reads the node
	// key's own znodes, not every forever znode: O(1) per node. 1.5 is
	// room for the longer wait of a larger crowd (more renewals while
	// waiting) and for lost races on shared znodes.
	scaleStartGrowth = 1.5
	// scaleRestartGrowth: ZooKeeper requests per restarted node from its
	// clean stop until it is back in service: O(1) per node, as a start.
	scaleRestartGrowth = 1.5
	// scaleRecycleScans and scaleRecycleSlack bound the reads of every
	// recycling key (from its start until in service), a quarter of the
	// cluster recycling at once: at most scaleRecycleScans reads of each
	// forever znode, plus scaleRecycleSlack for the claim's own reads.
	// Recyclers that lose a race on a global version and scan everything
	// again exceed it.
	scaleRecycleScans = 3
	scaleRecycleSlack = 64
)

// scaleRestartEvery and scaleRecycleEvery pick the nodes restarted (n/16)
// and the nodes stopped for good (n/4), disjoint; scaleSteadyFor is the
// steady phase's length (three peer check rounds), after scaleWarmup.
const (
	scaleRestartEvery = 16
	scaleRecycleEvery = 4
	scaleSteadyFor    = 3 * scalePeerInterval
	scaleWarmup       = scalePeerInterval
	scaleStartLimit   = 2 * time.Minute // virtual: the mass start and the recyclers' start
	scaleRestartLimit = 30 * time.Second
)

// scaleSizes are the cluster sizes to run, the reference first.
func scaleSizes(t *testing.T) []int {
	t.Helper()
	if s := os.Getenv("SIM_SCALE_N"); s != "" {
		var out []int
		for _, f := range strings.Split(s, ",") {
			v, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || v < scaleRestartEvery || v > 1<<10 {
				t.Fatalf("SIM_SCALE_N=%q: want sizes of %d to 1024, comma-separated", s, scaleRestartEvery)
			}
			out = append(out, v)
		}
		return out
	}
	if testsupport.RaceEnabled {
		return []int{16}
	}
	return []int{64, 1024}
}

// scaleMean is a per-node figure: the mean and the worst over the nodes
// measured.
type scaleMean struct {
	reqs, reads, writes, dials float64 // means
	maxReqs, maxReads          int64
}

func meanCost(nodes []*scaleNode) scaleMean {
	var m scaleMean
	for _, nd := range nodes {
		c := nd.cost
		m.reqs += float64(c.requests())
		m.reads += float64(c.reads)
		m.writes += float64(c.writes)
		m.dials += float64(c.dials)
		m.maxReqs, m.maxReads = max(m.maxReqs, c.requests()), max(m.maxReads, c.reads)
	}
	k := float64(max(len(nodes), 1))
	m.reqs, m.reads, m.writes, m.dials = m.reqs/k, m.reads/k, m.writes/k, m.dials/k
	return m
}

func (m scaleMean) String() string {
	return fmt.Sprintf("%.1f requests (%.1f reads, %.1f writes; worst %d requests, %d reads), %.2f sessions",
		m.reqs, m.reads, m.writes, m.maxReqs, m.maxReads, m.dials)
}

// scaleFigures are one cluster size's figures, per phase.
type scaleFigures struct {
	n            int
	wall         time.Duration // real time the world took
	startVirtual time.Duration // until every node was in service
	start        scaleMean     // per node
	startShapes  string
	// steadyRate and steadyReads are ZooKeeper requests and reads per node
	// per virtual second; peersPerRound is peers asked per node per round.
	steadyRate, steadyReads float64
	peersPerRound           float64
	steadyShapes            string
	restarted               int
	restart                 scaleMean // per restarted node
	// restartOthers is the other nodes' ZooKeeper requests per node per
	// virtual second during the restarts (compare steadyRate: what each
	// restart costs the rest of the cluster).
	restartOthers  float64
	restartShapes  string
	recycled       int
	recycleForever int       // forever znodes when the recyclers started
	recycle        scaleMean // per recycling key
	recycleShapes  string
}

func (f scaleFigures) String() string {
	return fmt.Sprintf(`%d nodes (%v of real time):
	mass start: all in service after %v (virtual); per node: %s%s
	steady: %.2f ZooKeeper requests (%.2f reads) per node per second; %.1f peers asked per node per round%s
	rolling restart of %d: per restarted node: %s; the others meanwhile: %.2f requests per node per second%s
	recycling by %d new keys (%d forever znodes): per key: %s%s`,
		f.n, f.wall.Round(time.Millisecond), f.startVirtual, f.start, f.startShapes,
		f.steadyRate, f.steadyReads, f.peersPerRound, f.steadyShapes,
		f.restarted, f.restart, f.restartOthers, f.restartShapes,
		f.recycled, f.recycleForever, f.recycle, f.recycleShapes)
}

// scaleCheck is one figure compared across the sizes.
type scaleCheck struct {
	name         string
	small, large float64
	factor       float64
}

func scaleChecks(small, large scaleFigures) []scaleCheck {
	return []scaleCheck{
		{"steady ZooKeeper requests per node per second", small.steadyRate, large.steadyRate, scaleSteadyGrowth},
		{"peers asked per node per peer check round", small.peersPerRound, large.peersPerRound, scalePeerGrowth},
		{"ZooKeeper requests per node at the mass start", small.start.reqs, large.start.reqs, scaleStartGrowth},
		{"ZooKeeper requests per restarted node", small.restart.reqs, large.restart.reqs, scaleRestartGrowth},
	}
}

// checkRecycleReads: no recycling key read more than scaleRecycleScans
// times the forever znodes, plus scaleRecycleSlack.
func checkRecycleReads(t *testing.T, f scaleFigures) {
	t.Helper()
	if most := int64(scaleRecycleScans*f.recycleForever + scaleRecycleSlack); f.recycle.maxReads > most {
		t.Errorf("%d nodes: a recycling key read ZooKeeper %d times, over %d×%d forever znodes + %d = %d",
			f.n, f.recycle.maxReads, scaleRecycleScans, f.recycleForever, scaleRecycleSlack, most)
	}
}

// runScaleSim runs the four phases on a cluster of n nodes.
func runScaleSim(t *testing.T, n int) (f scaleFigures, err error) {
	t.Helper()
	dir := t.TempDir()
	began := time.Now()
	synctest.Test(t, func(t *testing.T) {
		s := newScaleSim(t, n, dir)
		f.n = n
		err = s.run(&f)
		if len(s.live()) > 0 {
			if stopErr := s.stopAll(s.live()); err == nil {
				err = stopErr
			}
		}
		time.Sleep(time.Minute) // the HTTP servers' idle-worker cleaners notice their stop (they sleep 10s)
	})
	f.wall = time.Since(began)
	return f, err
}

// run runs the phases, filling f.
func (s *scaleSim) run(f *scaleFigures) error {
	phases := []struct {
		name string
		run  func(*scaleFigures) error
	}{{"mass start", s.massStart}, {"steady", s.steady}, {"rolling restart", s.rollingRestart}, {"recycling", s.recycling}}
	for _, ph := range phases {
		t0 := time.Now() // virtual
		if err := ph.run(f); err != nil {
			return fmt.Errorf("%s: %w", ph.name, err)
		}
		if err := s.checkIDs(); err != nil {
			return fmt.Errorf("after %s: %w", ph.name, err)
		}
		s.t.Logf("%d nodes: %s done in %v of virtual time, %d IDs checked so far", s.n, ph.name, time.Since(t0), len(s.issued))
	}
	return nil
}

// massStart starts n nodes at once and waits until all are in service.
func (s *scaleSim) massStart(f *scaleFigures) error {
	_, shapes := s.counts.total()
	for range s.n {
		s.start(s.addNode())
	}
	took, err := s.waitInService(s.nodes, 250*time.Millisecond, scaleStartLimit)
	if err != nil {
		return err
	}
	_, after := s.counts.total()
	f.startVirtual, f.start, f.startShapes = took, meanCost(s.nodes), topShapes(shapes, after, 6)
	return nil
}

// steady lets the cluster run scaleSteadyFor after scaleWarmup.
func (s *scaleSim) steady(f *scaleFigures) error {
	time.Sleep(scaleWarmup)
	before, shapes := s.counts.total()
	rounds0, asked0 := s.peerTotals()
	time.Sleep(scaleSteadyFor)
	after, shapesAfter := s.counts.total()
	rounds1, asked1 := s.peerTotals()
	per := float64(s.n) * scaleSteadyFor.Seconds()
	d := after.minus(before)
	f.steadyRate, f.steadyReads = float64(d.requests())/per, float64(d.reads)/per
	if rounds1 > rounds0 {
		f.peersPerRound = float64(asked1-asked0) / float64(rounds1-rounds0)
	}
	f.steadyShapes = topShapes(shapes, shapesAfter, 6)
	return nil
}

// rollingRestart stops every scaleRestartEvery-th node cleanly and starts
// it again on its disk, one after another, each back in service before
// the next.
func (s *scaleSim) rollingRestart(f *scaleFigures) error {
	before, shapes := s.counts.total()
	t0 := time.Now()
	var restarted []*scaleNode
	var own scaleOps
	for i := 0; i < s.n; i += scaleRestartEvery {
		nd := s.nodes[i]
		nd.began = s.counts.of(nd.key)
		if err := s.stopAll([]*scaleNode{nd}); err != nil {
			return err
		}
		s.start(nd)
		if _, err := s.waitInService([]*scaleNode{nd}, 50*time.Millisecond, scaleRestartLimit); err != nil {
			return err
		}
		restarted = append(restarted, nd)
		own = own.plus(nd.cost)
	}
	after, shapesAfter := s.counts.total()
	others := after.minus(before).minus(own)
	f.restarted, f.restart = len(restarted), meanCost(restarted)
	if secs := time.Since(t0).Seconds(); secs > 0 {
		f.restartOthers = float64(others.requests()) / float64(s.n-1) / secs
	}
	f.restartShapes = topShapes(shapes, shapesAfter, 6)
	return nil
}

// recycling stops every scaleRecycleEvery-th node (from the third) for
// good, lets recycle-after pass, and starts as many new node keys at
// once: each must take over one of their worker IDs.
func (s *scaleSim) recycling(f *scaleFigures) error {
	var gone []*scaleNode
	for i := scaleRecycleEvery - 1; i < s.n; i += scaleRecycleEvery {
		gone = append(gone, s.nodes[i])
	}
	if err := s.stopAll(gone); err != nil {
		return err
	}
	time.Sleep(scaleRecycleAfter + 2*time.Second)
	_, shapes := s.counts.total()
	f.recycleForever = s.foreverCount() + len(gone)
	fresh := make([]*scaleNode, len(gone))
	for i := range fresh {
		fresh[i] = s.addNode()
		s.start(fresh[i])
	}
	if _, err := s.waitInService(fresh, 250*time.Millisecond, scaleStartLimit); err != nil {
		return err
	}
	_, after := s.counts.total()
	f.recycled, f.recycle, f.recycleShapes = len(fresh), meanCost(fresh), topShapes(shapes, after, 6)
	return nil
}
