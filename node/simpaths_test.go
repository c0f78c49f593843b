package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/internal/zkconn/zkmem"
)

// The paths simulation is the snowflake simulation with the paths its
// plain schedule never takes (docs/fencing.md):
//
//   - the cluster is created by an operator (coordinator.CreateCluster, as
//     snowflakectl cluster create) before nodes without --create-cluster
//     start, or, in one seed in three, while nodes with --create-cluster
//     start: every create must agree on one cluster;
//   - the layout has gene bits and the nodes claim within a worker-ID range
//     narrower than the worker field: every ID asked with a gene ends in
//     it, every worker ID is in the range;
//   - S4's re-claim: a node comes back on an empty disk (its old one out
//     for repair) and claims its worker ID afresh, issues, dies; its old
//     disk is put back (or, one time in three, a restart's claim commits
//     and its first fence write never lands) and it restarts while
//     ZooKeeper is down, resumes
//     with the cache file's token, which is no longer ZooKeeper's, often
//     with its clock back where its old run stopped; when ZooKeeper
//     answers it claims afresh (half the time with that multi's answer
//     lost, so the attempt is recognised and completed) and must start
//     after the other run's fence;
//   - retiring a killed node's key (coordinator.Retire, as snowflakectl
//     node retire): its worker ID is then taken by a new machine with its
//     clock behind, or the retired node comes back on its own disk;
//   - an operator correcting a clock step back while the node serves or
//     borrows: the forward step is a correction, never held as a jump.
//
// Odd seeds run a world of both rollback policies, even seeds the borrow
// world's 256 IDs a tick and fence 30ms ahead; both with 4 gene bits of
// the sequence (2 in the borrow world) and the worker-ID range 1-3 of the
// four worker IDs.
var (
	snowPaths       = snowWorld{seqBits: 20, maxBatch: 50, fenceAhead: time.Second, borrowEvery: 2, geneBits: 4, workerRange: "1-3", paths: true}
	snowPathsBorrow = snowWorld{seqBits: 8, maxBatch: 4000, fenceAhead: 200 * time.Millisecond, readStep: time.Microsecond, borrowEvery: 1,
		geneBits: 2, workerRange: "1-3", paths: true}
)

// pathsWorld is the world of a seed of the paths simulation.
func pathsWorld(seed uint64) snowWorld {
	if seed%2 == 0 {
		return snowPathsBorrow
	}
	return snowPaths
}

func runPathsSim(t *testing.T, seed uint64, steps int) (snowStats, error) {
	t.Helper()
	return runSnowSim(t, seed, steps, pathsWorld(seed))
}

// TestSimulation_SnowflakePaths runs the paths simulation (default 40
// seeds, SIM_SEEDS and SIM_SEED as for the others) and asserts over the
// seeds that each path was taken.
func TestSimulation_SnowflakePaths(t *testing.T) {
	steps := simSteps(t)
	seeds := simSeeds(t)
	if os.Getenv("SIM_SEED") == "" && os.Getenv("SIM_SEEDS") == "" {
		seeds = seeds[:max(len(seeds)/25, 1)]
	}
	var total snowStats
	for _, seed := range seeds {
		st, err := runPathsSim(t, seed, steps)
		if err != nil {
			t.Fatalf("seed %d (replay: SIM_SEED=%d go test -run TestSimulation_SnowflakePaths ./node/): %v", seed, seed, err)
		}
		total.issued, total.batches = total.issued+st.issued, total.batches+st.batches
		total.borrowed, total.exhausted = total.borrowed+st.borrowed, total.exhausted+st.exhausted
		total.paths.add(st.paths)
	}
	p := total.paths
	if len(seeds) >= 20 {
		for _, c := range []struct {
			what string
			n    int64
		}{
			{"re-claims completed", p.reclaims},
			{"re-claims completed after their multi's answer was lost", p.reclaimsLost},
			{"claims committed whose first fence write never landed", p.hungClaims},
			{"clusters created by the operator before the nodes", p.adminCreated},
			{"clusters created by the operator racing nodes with --create-cluster", p.createRaces},
			{"killed nodes retired", p.retires},
			{"retired nodes back on their own disk", p.retiredBack},
			{"corrections of a step back", p.corrections},
			{"IDs asked with a gene", p.geneIDs},
			{"IDs borrowed", total.borrowed},
		} {
			if c.n == 0 {
				t.Errorf("%d seeds: no %s: the path was not taken", len(seeds), c.what)
			}
		}
	}
	t.Logf("%d seeds of %d steps: %d IDs in %d batches, none twice, %d asked with a gene, all in the worker-ID range; "+
		"%d re-claims completed (%d of them after the claim's answer was lost; %d attempts, %d of them after a claim whose first fence write never landed); "+
		"%d clusters created by the operator first, %d racing nodes; %d retires (%d retired nodes back on their disk); "+
		"%d corrections (%d while borrowing), none held as a jump; %d IDs borrowed",
		len(seeds), steps, total.issued, total.batches, p.geneIDs, p.reclaims, p.reclaimsLost, p.reclaimSteps, p.hungClaims,
		p.adminCreated, p.createRaces, p.retires, p.retiredBack, p.corrections, p.correctionsBorrowing, total.borrowed)
}

// pathStats counts the paths a run took.
type pathStats struct {
	reclaimSteps, reclaims, reclaimsLost int64
	hungClaims                           int64 // claims committed whose first fence write never landed
	adminCreated, createRaces            int64
	retires, retiredBack                 int64
	corrections, correctionsBorrowing    int64
	geneIDs                              int64
}

func (p *pathStats) add(o pathStats) {
	p.reclaimSteps += o.reclaimSteps
	p.reclaims += o.reclaims
	p.reclaimsLost += o.reclaimsLost
	p.hungClaims += o.hungClaims
	p.adminCreated += o.adminCreated
	p.createRaces += o.createRaces
	p.retires += o.retires
	p.retiredBack += o.retiredBack
	p.corrections += o.corrections
	p.correctionsBorrowing += o.correctionsBorrowing
	p.geneIDs += o.geneIDs
}

// pathsState is a run's state for the paths.
type pathsState struct {
	nodesCreate bool               // the nodes start with --create-cluster
	createDone  chan createOutcome // the operator's create racing them
	admin       simClients         // snowflakectl's ZooKeeper clients
	rangeLo     int64              // the worker-ID range
	rangeHi     int64              //
	reclaims    atomic.Int64       // completed, as the coordinators logged them
	lostDone    atomic.Int64       // of which after the claim's answer was lost
	loseMu      sync.Mutex         // guards loseFor, loseSess
	loseFor     *snowProc          // lose the answer of this process's next multi
	loseSess    map[int64]bool     // its sessions

	// create runs the operator's cluster create (again when ZooKeeper failed it).
	create func() (coordinator.CreateResult, error)
}

// createOutcome is what the operator's create racing the nodes did.
type createOutcome struct {
	created bool
	err     error
}

// pathsProc is a process's state for the paths.
type pathsProc struct {
	reclaimed atomic.Int64 // re-claims its coordinator completed
	lost      atomic.Bool  // a multi of its re-claim lost its answer
	slow      atomic.Bool  // its fence writes read the token a fifth of --fence-ahead late
}

// slowToken is p's seams.beforeToken: while p.slow, a fence write reads
// the coordinator's token a fifth of --fence-ahead after the keeper
// computed the fence (within the write's deadline of a third), so a
// re-claim completing meanwhile lands between the two, as it may on a
// loaded machine.
func (s *snowSim) slowToken(p *snowProc) func() {
	d := s.world.fenceAhead / 5
	return func() {
		if p.slow.Load() {
			s.pause(d)
		}
	}
}

// reclaimHook counts the re-claims a coordinator completes (its log line).
type reclaimHook struct {
	s *snowSim
	p *snowProc
}

func (h reclaimHook) Run(_ *zerolog.Event, _ zerolog.Level, msg string) {
	if strings.HasPrefix(msg, "claimed the worker ID afresh") {
		h.p.reclaimed.Add(1)
		h.s.reclaims.Add(1)
		if h.p.lost.Load() {
			h.s.lostDone.Add(1)
		}
	}
}

// watchLog is log with the hook that counts p's re-claims.
func (s *snowSim) watchLog(p *snowProc, log zerolog.Logger) zerolog.Logger {
	if log.GetLevel() == zerolog.Disabled {
		log = zerolog.New(io.Discard).Level(zerolog.WarnLevel)
	}
	return log.Hook(reclaimHook{s, p})
}

// injectPaths is the simulation's ZooKeeper faults, and the lost answer of
// a re-claim's multi.
func (s *snowSim) injectPaths(r zkmem.Request) zkmem.Fault {
	f := s.simZK.inject(r)
	if r.Op != "multi" {
		return f
	}
	s.loseMu.Lock()
	defer s.loseMu.Unlock()
	if p := s.loseFor; p != nil && s.loseSess[r.Session] {
		f.Kind, f.Down = zkmem.LoseAnswer, 200*time.Millisecond
		s.loseFor = nil
		p.lost.Store(true)
	}
	return f
}

// loseNextMulti makes p's next multi lose its answer (nil: none), and
// keeps the set of p's sessions current.
func (s *snowSim) loseNextMulti(p *snowProc, armed bool) {
	sess := map[int64]bool{}
	if p != nil {
		p.zk.mu.Lock()
		conns := append([]*zkmem.Conn(nil), p.zk.conns...)
		p.zk.mu.Unlock()
		for _, c := range conns {
			sess[c.SessionID()] = true
		}
	}
	s.loseMu.Lock()
	defer s.loseMu.Unlock()
	if !armed {
		s.loseFor = nil
	} else if !p.lost.Load() {
		s.loseFor = p
	}
	s.loseSess = sess
}

func (s *snowSim) adminDial() coordinator.AdminOption {
	return coordinator.WithAdminDial(s.admin.dialer(s.srv, "snowflakectl"))
}

// operator runs do as one snowflakectl command: with a handle of its own
// on the simulated ZooKeeper, bounded by timeout, closed after do.
func (s *snowSim) operator(timeout time.Duration, do func(a *coordinator.Admin) error) error {
	a, err := coordinator.NewAdmin([]string{"127.0.0.1:2181"}, "", timeout, s.adminDial())
	if err != nil {
		return err
	}
	defer a.Close()
	return do(a)
}

// createCluster creates the cluster as an operator does, before the nodes
// start, or racing them (one seed in three: they start with
// --create-cluster).
func (s *snowSim) createCluster() error {
	s.srv.SetInjector(s.injectPaths)
	r, err := coordinator.ParseWorkerRange(s.world.workerRange)
	if err != nil {
		return err
	}
	s.rangeLo, s.rangeHi = r.Lo, r.Hi
	cfg := defaultConfig()
	cfg.Layout, cfg.Epoch, cfg.GeneBits = s.world.layout(), "1999-12-01T00:00:00Z", s.world.geneBits
	l, err := cfg.parseLayout(time.Now())
	if err != nil {
		return err
	}
	spec := coordinator.ClusterSpec{Layout: l, WorkerIDs: r, RecycleAfter: 20 * time.Second}
	create := func() (coordinator.CreateResult, error) {
		var res coordinator.CreateResult
		err := s.operator(10*time.Second, func(a *coordinator.Admin) (err error) {
			res, err = a.CreateCluster(s.bg(), snowCluster, spec)
			return err
		})
		return res, err
	}
	s.nodesCreate = s.rng.IntN(3) == 0
	if !s.nodesCreate {
		res, err := create()
		if err != nil || !res.Created {
			return s.fail("snowflakectl cluster create: created %v: %v", res.Created, err)
		}
		s.stats.paths.adminCreated++
		s.logf("cluster created by the operator (requires %v)", res.Requires)
		return nil
	}
	s.stats.paths.createRaces++
	s.createDone = make(chan createOutcome, 1)
	s.create = create
	go func() {
		res, err := create()
		s.createDone <- createOutcome{res.Created, err}
	}()
	return nil
}

// drawGene draws the gene of a request (-1: none) in a world with gene
// bits; a world without draws nothing.
func (s *snowSim) drawGene() (int64, string) {
	if s.world.geneBits == 0 || s.rng.IntN(2) == 0 {
		return -1, ""
	}
	g := s.rng.Int64N(1 << 62)
	return g, "&gene=" + strconv.FormatInt(g, 10)
}

// checkPathsID: an ID asked with a gene ends in the gene's low bits
// (docs/api.md), and every worker ID is within the cluster's range.
func (s *snowSim) checkPathsID(proc string, id, gene int64) error {
	if gene >= 0 {
		mask := int64(1)<<s.world.geneBits - 1
		if id&mask != gene&mask {
			return s.fail("%s: ID %d asked with gene %d ends in %d, not %d", proc, id, gene, id&mask, gene&mask)
		}
		s.stats.paths.geneIDs++
	}
	if s.world.workerRange != "" {
		w := (id >> s.world.seqBits) & (1<<snowWorkerBits - 1)
		if w < s.rangeLo || w > s.rangeHi {
			return s.fail("%s: ID %d of worker %d, outside the cluster's worker-ID range %s", proc, id, w, s.world.workerRange)
		}
	}
	return nil
}

// pathStep takes one of the paths' steps (taken false: none, the plain
// schedule goes on).
func (s *snowSim) pathStep() (taken bool, err error) {
	switch r := s.rng.IntN(100); {
	case r < 2:
		return true, s.reclaimStep()
	case r < 3:
		return true, s.retireStep()
	case r < 5:
		return true, s.correctionStep()
	}
	return false, nil
}

func (s *snowSim) pickLive() *snowNode {
	var live []*snowNode
	for _, n := range s.nodes {
		if n.proc != nil {
			live = append(live, n)
		}
	}
	if len(live) == 0 {
		return nil
	}
	return live[s.rng.IntN(len(live))]
}

// issueWhile asks n's process for IDs every gap until it handed out want
// batches or tries asks were made.
func (s *snowSim) issueWhile(n *snowNode, want, tries int, gap time.Duration) error {
	p := n.proc
	for got, i := 0, 0; got < want && i < tries; i++ {
		s.reap()
		if n.proc != p {
			return nil
		}
		before := s.stats.batches
		if err := s.issue(n); err != nil {
			return err
		}
		if s.stats.batches > before {
			got++
		}
		s.pause(gap)
	}
	return nil
}

// reclaimStep: the node comes back on an empty disk, claims its worker ID
// afresh and issues, dies; its old disk is put back and it restarts while
// ZooKeeper is down (S4: resumed with a token that is no longer
// ZooKeeper's), usually with its clock back where its old run stopped.
// When ZooKeeper answers it must claim afresh and start after the other
// run's fence.
func (s *snowSim) reclaimStep() error {
	n := s.pickLive()
	if n == nil {
		return nil
	}
	s.stats.paths.reclaimSteps++
	// ZooKeeper's random faults end (the outage below and the re-claim's
	// lost answer are this step's): under heavy loss the re-claim would
	// take longer than the step waits.
	s.healZK()
	stopped := n.clock.asSet()
	s.kill(n, false)
	if s.rng.IntN(3) == 0 {
		// The other way to a stale token (S3): a restart whose claim
		// commits and whose first fence write never lands (its disk
		// hangs, then kill -9) leaves the old token in the cache file.
		before := s.foreverToken(n.key)
		s.start(n)
		p := n.proc
		p.dproc.Hang(time.Hour)
		for i := 0; i < 2000 && s.foreverToken(n.key) == before; i++ {
			s.pause(10 * time.Millisecond)
		}
		committed := s.foreverToken(n.key) != before
		if committed {
			s.stats.paths.hungClaims++
		}
		s.logf("%s: its disk hangs; the claim committed: %v", p.name, committed)
		s.reap()
		if n.proc == p {
			s.kill(n, false)
		} else {
			p.dproc.Kill() // exited by itself: its hung write never lands
		}
	} else {
		old := n.disk
		n.disk = s.newDisk()
		s.logf("%s: back on an empty disk (its own is out for repair)", n.key)
		s.start(n)
		if err := s.issueWhile(n, 2, 40, 500*time.Millisecond); err != nil {
			return err
		}
		if n.proc != nil {
			s.kill(n, false)
		}
		n.disk = old
	}
	stall := time.Duration(8000+s.rng.IntN(4000)) * time.Millisecond
	s.stall(stall)
	if s.rng.IntN(4) != 0 {
		target := stopped - int64(stall) + int64(s.rng.IntN(3000))*int64(time.Millisecond)
		n.clock.set(target - time.Now().UnixNano())
	}
	lose, crash := s.rng.IntN(2) == 0, s.rng.IntN(2) == 0
	s.logf("%s: its own disk is back; it restarts while ZooKeeper is down for %v, clock %v (the re-claim's answer lost: %v; kill -9 right after it: %v)",
		n.key, stall, time.Duration(n.clock.off.Load()), lose, crash)
	s.start(n)
	p := n.proc
	p.slow.Store(crash)
	for end := time.Now().Add(stall + 30*time.Second); time.Now().Before(end) && p.reclaimed.Load() == 0; {
		s.loseNextMulti(p, lose)
		s.pause(50 * time.Millisecond)
		s.reap()
		if n.proc != p {
			break
		}
	}
	s.loseNextMulti(nil, false)
	if p.reclaimed.Load() == 0 {
		s.logf("%s: no re-claim", p.name)
		return nil
	}
	s.logf("%s: claimed its worker ID afresh (the answer was lost first: %v)", p.name, p.lost.Load())
	if crash && n.proc == p {
		// A fence write that read the new token after the re-claim has
		// landed, the next has not: the cache file names the new token,
		// with the fence S4 requires (at least the previous holder's).
		// The restart replaces exactly that token: it starts after the
		// file's fence.
		s.pause(s.world.fenceAhead / 4)
		s.kill(n, false)
		s.start(n)
	}
	// Its clock walks through the ticks the other run issued in.
	return s.issueWhile(n, 1000, 40, 250*time.Millisecond)
}

// foreverToken is the token in node key's forever znode ("" when none).
func (s *snowSim) foreverToken(key string) string {
	dir := "/snowflaked/" + snowCluster + "/forever"
	for _, c := range s.srv.Children(dir) {
		if !strings.HasPrefix(c, key+"-") {
			continue
		}
		b, _, _ := s.srv.Get(dir + "/" + c)
		var d struct {
			Token string `json:"token"`
		}
		if json.Unmarshal(b, &d) == nil {
			return d.Token
		}
	}
	return ""
}

// retireStep kills a node that issued and retires its key as an operator
// does once its lease is gone; then a new machine (a new key, its clock
// up to 20s behind the dead node's last IDs) takes its place, or the retired
// node comes back on its own disk (it claims like any start: its own
// znode, or another worker ID if its was taken over meanwhile; issuing
// after every fence either way).
func (s *snowSim) retireStep() error {
	var issued []*snowNode
	for _, n := range s.nodes {
		if n.proc != nil && n.proc.last > 0 {
			issued = append(issued, n)
		}
	}
	if len(issued) == 0 {
		return nil
	}
	n := issued[s.rng.IntN(len(issued))]
	died := n.clock.asSet()
	s.kill(n, false)
	key := n.key
	retired := false
	for range 15 {
		var res coordinator.Retired
		err := s.operator(5*time.Second, func(a *coordinator.Admin) (err error) {
			res, err = a.Retire(s.bg(), snowCluster, key)
			return err
		})
		if err == nil {
			s.logf("snowflakectl node retire %s: worker IDs %v after fence %d", key, res.WorkerIDs, res.Fence)
			retired = true
			break
		}
		s.logf("snowflakectl node retire %s: %v", key, strings.SplitN(err.Error(), ":", 2)[0])
		if !errors.Is(err, coordinator.ErrLeaseHeld) && !errors.Is(err, coordinator.ErrZKUnavailable) {
			break
		}
		s.pause(time.Second)
	}
	if !retired {
		return nil
	}
	s.stats.paths.retires++
	if s.rng.IntN(3) == 0 {
		s.stats.paths.retiredBack++
		s.logf("%s: the retired node comes back on its own disk", key)
	} else {
		n.disk.Wipe()
		s.keys++
		n.key = fmt.Sprintf("k%d", s.keys)
		n.clock.set(died - int64(s.rng.IntN(20000))*int64(time.Millisecond) - time.Now().UnixNano())
		s.logf("%s: a new machine in its place, its clock %v off", n.key, time.Duration(n.clock.off.Load()))
	}
	s.start(n)
	return s.issueWhile(n, 3, 40, 500*time.Millisecond)
}

// correctionStep steps a serving node's clock back and, while the node
// borrows or waits, has the operator set it right: the forward step is a
// correction (docs/fencing.md, "A correction is not a jump"), never held as
// a jump.
func (s *snowSim) correctionStep() error {
	n := s.pickLive()
	if n == nil {
		return nil
	}
	p := n.proc
	nd := p.n.Load()
	// The guard looks at the clock now (a step of an earlier schedule step
	// at this virtual instant is judged first, by itself): a jump held
	// already is no step back to correct.
	if nd == nil || nd.jumps == nil || nd.jumps.Holding() {
		return nil
	}
	back := time.Duration(200+s.rng.IntN(5000)) * time.Millisecond
	n.clock.off.Add(-int64(back))
	s.logf("%s: clock steps back %v", p.name, back)
	borrowedBefore := nd.gen.Stats().Borrowed
	if err := s.issueWhile(n, 2, 1+s.rng.IntN(4), time.Duration(50+s.rng.IntN(300))*time.Millisecond); err != nil {
		return err
	}
	if n.proc != p {
		return nil
	}
	n.clock.off.Add(int64(back))
	s.logf("%s: the operator sets the clock right (+%v)", p.name, back)
	s.stats.paths.corrections++
	if nd.gen.Stats().Borrowed > borrowedBefore {
		s.stats.paths.correctionsBorrowing++
	}
	s.pause(500 * time.Millisecond) // the jump guard looks every 20ms
	if nd.jumps.Suspicious() {
		return s.fail("%s: the clock set right after a step back of %v is held as a jump (clock_jump): %+v", p.name, back, nd.guard.Status())
	}
	return s.issueWhile(n, 2, 4, 250*time.Millisecond)
}

// pathsDone checks what the paths leave to the end of a run and adds
// their figures to the stats.
func (s *snowSim) pathsDone() error {
	if s.createDone != nil {
		noAnswer := s.after(30 * time.Second)
		defer noAnswer.Stop()
		select {
		case out := <-s.createDone:
			if errors.Is(out.err, context.DeadlineExceeded) || errors.Is(out.err, coordinator.ErrZKUnavailable) {
				// ZooKeeper failed the command (a step can stall it 15s,
				// or break its connection): the operator runs it again,
				// now that ZooKeeper answers, and it must end well.
				s.logf("the operator's cluster create, racing the nodes, failed: %v; again", out.err)
				res, err := s.create()
				out = createOutcome{res.Created, err}
			}
			if out.err != nil {
				return s.fail("snowflakectl cluster create, racing nodes with --create-cluster: %v", out.err)
			}
			s.logf("the operator's cluster create, racing the nodes: created %v", out.created)
		case <-noAnswer.C:
			return s.fail("snowflakectl cluster create, racing nodes with --create-cluster: no answer")
		}
	}
	s.stats.paths.reclaims = s.reclaims.Load()
	s.stats.paths.reclaimsLost = s.lostDone.Load()
	return nil
}
