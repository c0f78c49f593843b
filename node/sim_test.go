package node

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"codeberg.org/snowflaked/snowflaked/internal/disk"
	"codeberg.org/snowflaked/snowflaked/internal/zkconn"
)

// The snowflake simulation runs whole nodes — node.Run: the claim, the
// cache file, the fence keeper, the coordinator's renewals and recycling,
// the clock guard, the HTTP handler, the stop sequence with its final
// fences — against the in-memory ZooKeeper, on in-memory disks that die
// with their process, with clocks that step both ways, in virtual time.
// Node keys come and go (a wiped disk may come back as a new machine, a
// node key moves to a new machine while its old process is cut off from
// ZooKeeper), and the layout has 4 worker IDs, so IDs are recycled. It
// checks, on every batch the handler answers, that no snowflake ID was
// issued twice and that IDs increase within a process.
//
// SIM_SEED, SIM_SEEDS and SIM_STEPS work as for the segment simulation
// (default 200 seeds, 10 under the race detector). SIM_SEED=N replays the
// seed's run: every timer of the world is armed through one clock.Apart
// (simZK.sched), and TestSimulation_Replays (replay_test.go) checks that
// two runs of a seed leave one trace.

const (
	snowNodes   = 3
	snowCluster = "sim"
	// Worker IDs: 2 bits, so four; node keys beyond them recycle.
	snowWorkerBits = 2
)

// snowWorld is what a simulation run is made of: the layout's sequence
// bits, the largest batch, and the rollback policy of each process.
type snowWorld struct {
	seqBits    uint
	maxBatch   int
	fenceAhead time.Duration // --fence-ahead
	// readStep moves a node's wall clock on by this much at every reading:
	// a generator that waits for the next tick spins on the clock, and in
	// the bubble's virtual time the clock would never move for it.
	readStep time.Duration
	// borrowEvery: 0 = every process leaves service on a rollback; 1 =
	// every process borrows; 2 = each process borrows or not at random.
	borrowEvery int
	// geneBits and workerRange are --gene-bits and --worker-id-range;
	// paths adds the schedule of node/simpaths_test.go (cluster created by
	// an operator, re-claims, retires, corrections).
	geneBits    uint
	workerRange string
	paths       bool
	// attacks: now and then a node key moves to a new machine while its
	// old process is cut off from ZooKeeper (simmigrate_test.go), and
	// reboots come with batches around them (simreboot_test.go).
	attacks bool
}

// The worlds: the snowflake simulation mixes both policies at 2^20 IDs a
// tick (no batch ever waits for a tick); the borrow simulation has 256 a
// tick, batches of up to 4000 and a fence 30ms ahead, so that borrowing
// runs into its fence.
var (
	snowMixed  = snowWorld{seqBits: 20, maxBatch: 50, fenceAhead: time.Second, borrowEvery: 2, attacks: true}
	snowBorrow = snowWorld{seqBits: 8, maxBatch: 4000, fenceAhead: 30 * time.Millisecond, readStep: time.Microsecond, borrowEvery: 1}
)

func (w snowWorld) layout() string { return fmt.Sprintf("41/%d/%d", snowWorkerBits, w.seqBits) }

func TestSimulation_Snowflake(t *testing.T) {
	steps := simSteps(t)
	seeds := simSeeds(t)
	if os.Getenv("SIM_SEED") == "" && os.Getenv("SIM_SEEDS") == "" {
		seeds = seeds[:max(len(seeds)/5, 1)]
	}
	var issued, batches int
	for _, seed := range seeds {
		st, err := runSnowSim(t, seed, steps, snowMixed)
		if err != nil {
			t.Fatalf("seed %d (replay: SIM_SEED=%d go test -run 'TestSimulation_Snowflake$' ./node/): %v", seed, seed, err)
		}
		issued, batches = issued+st.issued, batches+st.batches
	}
	t.Logf("%d seeds of %d steps: %d IDs in %d batches, none twice", len(seeds), steps, issued, batches)
}

// TestSimulation_SnowflakeBorrow runs the simulation with every process on
// --rollback-policy borrow, 256 IDs a tick and batches of up to 4000, so
// that borrowing through the clock steps (rollbacks during restarts, kill
// -9 while borrowing, partitions, ZooKeeper down) reaches its fences.
func TestSimulation_SnowflakeBorrow(t *testing.T) {
	steps := simSteps(t)
	seeds := simSeeds(t)
	if os.Getenv("SIM_SEED") == "" && os.Getenv("SIM_SEEDS") == "" {
		seeds = seeds[:max(len(seeds)/25, 1)]
	}
	var total snowStats
	for _, seed := range seeds {
		st, err := runSnowSim(t, seed, steps, snowBorrow)
		if err != nil {
			t.Fatalf("seed %d (replay: SIM_SEED=%d go test -run TestSimulation_SnowflakeBorrow ./node/): %v", seed, seed, err)
		}
		total.issued, total.batches = total.issued+st.issued, total.batches+st.batches
		total.borrowed, total.exhausted = total.borrowed+st.borrowed, total.exhausted+st.exhausted
	}
	// 25 seeds borrow every time; about one seed in four reaches a fence.
	if len(seeds) >= 10 && total.borrowed == 0 || len(seeds) >= 100 && total.exhausted == 0 {
		t.Fatalf("%d IDs borrowed, %d requests refused at the fence while borrowing: the runs did not borrow up to a fence", total.borrowed, total.exhausted)
	}
	t.Logf("%d seeds of %d steps: %d IDs in %d batches, none twice; %d borrowed, %d borrowing requests refused at the fence",
		len(seeds), steps, total.issued, total.batches, total.borrowed, total.exhausted)
}

// simClock is a node's clock in the bubble's virtual time, with a wall
// offset the simulation steps.
type simClock struct {
	origin time.Time
	off    atomic.Int64 // as the simulation set and stepped it (the trace shows it)
	// drift is what the wall readings added (step each, snowWorld.readStep):
	// how many readings came before a trace line can depend on which of
	// two timers of one virtual instant ran first, so the trace leaves it
	// out.
	drift atomic.Int64
	step  int64
}

func (c *simClock) WallNanos() int64 {
	return time.Now().UnixNano() + c.off.Load() + c.drift.Add(c.step)
}
func (c *simClock) Mono() time.Duration { return time.Since(c.origin) }

// asSet is the wall clock as the simulation set it, without the drift of
// its readings: what a step bases a clock it sets on, so that the value
// does not depend on how many readings came first.
func (c *simClock) asSet() int64 { return time.Now().UnixNano() + c.off.Load() }

// set sets the wall offset to off, the drift of the readings gone.
func (c *simClock) set(off int64) {
	c.off.Store(off)
	c.drift.Store(0)
}

type snowSim struct {
	*simZK
	world  snowWorld
	rng    *rand.Rand
	dir    string
	nodes  []*snowNode
	recent *snowNode // the node started last
	keys   int
	// stranded are processes whose node key moved to a new machine while
	// they were cut off from ZooKeeper (simmigrate_test.go); slots counts
	// the machines (cache file directories); migrations draws the moves.
	stranded   []*snowNode
	slots      int
	migrations *rand.Rand

	issued simIssued
	ticks  map[int64]map[string]*tickSpan // per worker ID, per process: the ticks it issued in
	stats  snowStats
	simTrace
	pathsState // node/simpaths_test.go
	// wrapDial, when set, wraps each process's ZooKeeper dialer (the
	// scenarios of node/simrules_test.go time a connection break with it).
	wrapDial func(p *snowProc, d zkconn.Dialer) zkconn.Dialer
}

type snowStats struct {
	issued, batches int
	// borrowed and exhausted sum the generators' Borrowed and
	// BorrowExhausted over every process that ended.
	borrowed, exhausted int64
	paths               pathStats // node/simpaths_test.go
	// trace is the run's trace (simTrace), for TestSimulation_Replays.
	trace []string
}

// ended adds the figures of a process that ended to the stats.
func (s *snowSim) ended(p *snowProc) {
	if nd := p.n.Load(); nd != nil && nd.gen != nil {
		st := nd.gen.Stats()
		s.stats.borrowed += st.Borrowed
		s.stats.exhausted += st.BorrowExhausted
	}
}

// tickSpan is the first and last tick a process issued IDs in.
type tickSpan struct{ lo, hi int64 }

type snowNode struct {
	slot  int
	key   string
	disk  *disk.Mem
	clock *simClock
	proc  *snowProc
	procs int
}

type snowProc struct {
	name   string
	borrow bool // --rollback-policy borrow
	n      atomic.Pointer[node]
	dproc  *disk.Proc
	cancel context.CancelFunc
	done   chan error
	last   int64
	zk     simClients

	pathsProc // node/simpaths_test.go
}

func (s *snowSim) cacheFile(n *snowNode) string {
	return filepath.Join(s.dir, fmt.Sprintf("slot%d", n.slot), "cache.json")
}

func (s *snowSim) config(n *snowNode, p *snowProc) Config {
	cfg := defaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Advertise = fmt.Sprintf("127.0.0.1:%d", 1+n.slot) // nothing listens there: peer checks find no one
	cfg.NodeKey = n.key
	cfg.Cluster = snowCluster
	cfg.ZK, cfg.CreateCluster = "127.0.0.1:2181", true
	cfg.ZKSessionTimeout = 4 * time.Second
	cfg.CacheFile = s.cacheFile(n)
	cfg.Layout = s.world.layout()
	cfg.MaxBatch = max(s.world.maxBatch, cfg.MaxBatch)
	if p.borrow {
		cfg.RollbackPolicy = rollbackBorrow
	}
	cfg.Epoch = "1999-12-01T00:00:00Z" // the bubble's clock starts in 2000
	cfg.RecycleAfter = 20 * time.Second
	cfg.ZKFenceAhead = 6 * time.Second
	cfg.ReportInterval = time.Second
	cfg.FenceAhead = s.world.fenceAhead
	cfg.MaxStartWait = 10 * time.Second
	cfg.ShutdownTimeout = 4 * time.Second
	cfg.seams = &seams{disk: p.dproc, dial: p.zk.dialer(s.srv, p.name)}
	if s.wrapDial != nil {
		cfg.seams.dial = s.wrapDial(p, cfg.seams.dial)
	}
	cfg.GeneBits, cfg.WorkerIDRange = s.world.geneBits, s.world.workerRange
	if s.world.paths {
		cfg.CreateCluster, cfg.seams.beforeToken = s.nodesCreate, s.slowToken(p)
	}
	return cfg
}

func (s *snowSim) start(n *snowNode) {
	n.procs++
	p := &snowProc{name: fmt.Sprintf("%s/%d", n.key, n.procs), dproc: n.disk.Process(), done: make(chan error, 1)}
	switch s.world.borrowEvery {
	case 1:
		p.borrow = true
	case 2:
		p.borrow = s.rng.IntN(2) == 0
	}
	ctx, cancel := context.WithCancel(s.bg())
	p.cancel = cancel
	ln := fasthttputil.NewInmemoryListener()
	log := zerolog.Nop()
	if synctestDebug {
		log = zerolog.New(os.Stderr).Level(zerolog.InfoLevel)
	}
	if s.world.paths {
		log = s.watchLog(p, log)
	}
	go func() {
		p.done <- Run(ctx, withSeams(s.config(n, p), withClock(n.clock), withListener(ln), withSchedule(s.sched),
			withBuilt(func(nd *node) { p.n.Store(nd) })), log)
	}()
	n.proc, s.recent = p, n
	s.logf("%s: start (clock %+v, borrow %v)", p.name, time.Duration(n.clock.off.Load()), p.borrow)
}

// kill is kill -9: the disk and ZooKeeper see nothing more of it.
func (s *snowSim) kill(n *snowNode, wipe bool) {
	p := n.proc
	p.dproc.Kill()
	p.zk.end(true)
	p.cancel()
	<-p.done
	s.ended(p)
	n.proc = nil
	if wipe {
		n.disk.Wipe()
		s.keys++
		n.key = fmt.Sprintf("k%d", s.keys) // a new machine in its place
	}
	s.logf("%s: kill -9 (disk wiped: %v)", p.name, wipe)
}

func (s *snowSim) stop(n *snowNode) {
	p := n.proc
	p.cancel()
	err := <-p.done
	s.ended(p)
	p.zk.end(false)
	n.proc = nil
	s.logf("%s: stop: %v", p.name, err)
}

func (s *snowSim) issue(n *snowNode) error {
	p := n.proc
	nd := p.n.Load()
	if nd == nil || nd.srv == nil {
		s.logf("%s: not serving yet", p.name)
		return nil
	}
	k := 1 + s.rng.IntN(s.world.maxBatch)
	var ctx fasthttp.RequestCtx
	var req fasthttp.Request
	gene, geneQuery := s.drawGene()
	req.SetRequestURI("/ids?count=" + strconv.Itoa(k) + geneQuery)
	ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9}, nil)
	nd.srv.Handler()(&ctx)
	if ctx.Response.StatusCode() != fasthttp.StatusOK {
		s.logf("%s: /ids %d: %d %.80s", p.name, k, ctx.Response.StatusCode(), ctx.Response.Body())
		return nil
	}
	lines := strings.Fields(string(ctx.Response.Body()))
	for _, l := range lines {
		id, err := strconv.ParseInt(l, 10, 64)
		if err != nil {
			return s.fail("%s: /ids answered %q", p.name, l)
		}
		if err := s.issued.record(&s.simTrace, "snowflake", p.name, &p.last, id); err != nil {
			return err
		}
		if err := s.checkSpan(p.name, id); err != nil {
			return err
		}
		if err := s.checkPathsID(p.name, id, gene); err != nil {
			return err
		}
	}
	s.stats.issued += len(lines)
	s.stats.batches++
	s.logf("%s: issued %d", p.name, len(lines))
	return nil
}

// checkSpan: the processes that held one worker ID issued in disjoint
// ranges of ticks. Two that overlap could issue the same ID (the sequence
// restarts with each process): virtual time makes the exact collision rare,
// the overlap shows the broken fence all the same.
func (s *snowSim) checkSpan(proc string, id int64) error {
	tick := id >> (snowWorkerBits + s.world.seqBits)
	worker := (id >> s.world.seqBits) & (1<<snowWorkerBits - 1)
	spans := s.ticks[worker]
	if spans == nil {
		spans = map[string]*tickSpan{}
		s.ticks[worker] = spans
	}
	sp := spans[proc]
	if sp == nil {
		sp = &tickSpan{tick, tick}
		spans[proc] = sp
	}
	sp.lo, sp.hi = min(sp.lo, tick), max(sp.hi, tick)
	for other, o := range spans {
		if other != proc && sp.lo <= o.hi && o.lo <= sp.hi {
			return s.fail("snowflake IDs of worker %d issued twice in one tick range: %s issued in ticks [%d,%d], %s in [%d,%d]",
				worker, proc, sp.lo, sp.hi, other, o.lo, o.hi)
		}
	}
	return nil
}

// settleFor is how long the nodes get to come back once the faults end: a
// forward clock jump that neither NTP nor a peer can confirm is held for a
// minute (the clocks set right are one more step), then the rounds.
const settleFor = 90 * time.Second

// settle ends the faults, sets the clocks right and gives the nodes
// settleFor: each must then be back in service by itself. The one legitimate
// exception is a node whose worker ID another node key recycled while it
// was silent (it stays out until restarted, by design); a node key's own
// claim taken for another process's never is one.
func (s *snowSim) settle() error {
	for _, n := range s.nodes {
		n.clock.set(0)
	}
	s.logf("faults healed, clocks set right")
	// A supervisor restarts whatever exits (a start that finds no free
	// worker ID yet exits 1) every 5s.
	for range int(settleFor / (5 * time.Second)) {
		s.reap()
		for _, n := range s.nodes {
			if n.proc == nil {
				s.start(n)
			}
		}
		s.pause(5 * time.Second)
	}
	for _, n := range s.nodes {
		p := n.proc
		if p == nil {
			continue
		}
		select {
		case err := <-p.done:
			p.done <- err
			return s.fail("%s still exits by itself: %v", p.name, err)
		default:
		}
		nd := p.n.Load()
		if nd == nil {
			return s.fail("%s never started serving", p.name)
		}
		if nd.guard.Ready() {
			continue
		}
		st := nd.coord.Status()
		if strings.Contains(st.LeaseDetail, "recycled") || strings.Contains(st.LeaseDetail, "taken over") {
			s.logf("%s: out for good, its worker ID recycled: %s", p.name, st.LeaseDetail)
			continue
		}
		return s.fail("%s still out of service %v after the faults ended: %+v; lease: %s", p.name, settleFor, nd.guard.Status(), st.LeaseDetail)
	}
	return nil
}

// reap notices processes that exited by themselves (a first start that
// found ZooKeeper unreachable exits 1; a supervisor starts it again).
func (s *snowSim) reap() {
	for _, n := range s.nodes {
		if p := n.proc; p != nil {
			select {
			case err := <-p.done:
				p.done <- err
				s.ended(p)
				p.zk.end(false)
				n.proc = nil
				s.logf("%s exited: %v", p.name, err)
			default:
			}
		}
	}
}

// checkNotFencedOutByItself: in this world one process at a time runs a
// node key, so a node that blocks because "another process" claimed its
// worker ID took its own claim for someone else's (it would stay out of
// service until restarted).
func (s *snowSim) checkNotFencedOutByItself() error {
	for _, n := range s.nodes {
		if n.proc == nil || s.isStranded(n.key) {
			continue
		}
		nd := n.proc.n.Load()
		if nd == nil || nd.coord == nil {
			continue
		}
		if d := nd.coord.Status().LeaseDetail; strings.Contains(d, "claimed by another process") {
			return s.fail("%s is blocked as if another process had claimed its worker ID, but none runs its node key: %s", n.proc.name, d)
		}
	}
	return nil
}

func (s *snowSim) step() error {
	s.reap()
	if err := s.checkNotFencedOutByItself(); err != nil {
		return err
	}
	if s.world.paths {
		if taken, err := s.pathStep(); taken {
			return err
		}
	}
	live, down := s.liveAndDown()
	if s.world.attacks && len(live) > 0 && s.migrations.IntN(migrateEvery) == 0 {
		s.migrate(live[s.migrations.IntN(len(live))], time.Duration(10+s.migrations.IntN(20))*time.Second)
		return nil
	}
	r := s.rng.IntN(100)
	switch {
	case r < 50 && len(live) > 0:
		return s.issueStep(live)
	case r < 60:
		s.pause(time.Duration(1+s.rng.IntN(500)) * time.Millisecond)
	case r < 65 && len(live) > 0:
		s.kill(s.pick(live), s.rng.IntN(6) == 0)
	case r < 69 && len(live) > 0:
		s.stop(s.pick(live))
	case r < 79 && len(down) > 0:
		s.start(s.pick(down))
	case r < 85:
		s.stepClock(s.pick(s.nodes))
	case r < 89:
		s.logf("%s", s.simZK.setFaults(s.rng))
	case r < 91:
		d := time.Duration(500+s.rng.IntN(15000)) * time.Millisecond
		s.stall(d)
		s.logf("ZooKeeper stalls for %v", d)
	case r < 93 && len(live) > 0:
		s.expireSession(s.pick(live))
	case r < 94 && len(live) > 0:
		return s.reboot(s.pick(live))
	case r < 96 && len(live) > 0:
		p := s.pick(live).proc
		s.logf("%s: %s", p.name, s.diskFault(s.rng, p.dproc, 5*time.Second))
	default:
		s.pause(time.Duration(1+s.rng.IntN(20000)) * time.Millisecond)
	}
	return nil
}

// issueStep issues a batch: a stranded batch's retry if there is one,
// else on the node started last (half the time: the moments after a start
// are where a fence rule matters) or on one of live.
func (s *snowSim) issueStep(live []*snowNode) error {
	if ok, err := s.issueStranded(); ok {
		return err
	}
	if s.recent != nil && s.recent.proc != nil && s.rng.IntN(2) == 0 {
		return s.issue(s.recent)
	}
	return s.issue(s.pick(live))
}

// expireSession expires one of n's ZooKeeper sessions, if it has one.
func (s *snowSim) expireSession(n *snowNode) {
	p := n.proc
	if c := p.zk.pick(s.rng); c != nil {
		s.srv.Expire(c.SessionID())
		s.logf("%s: a session expired", p.name)
	}
}

// liveAndDown splits the nodes into those with a running process and the
// others, in the nodes' order.
func (s *snowSim) liveAndDown() (live, down []*snowNode) {
	for _, n := range s.nodes {
		if n.proc != nil {
			live = append(live, n)
		} else {
			down = append(down, n)
		}
	}
	return live, down
}

// pick draws one of ns.
func (s *snowSim) pick(ns []*snowNode) *snowNode { return ns[s.rng.IntN(len(ns))] }

// stepClock sets n's clock right (a quarter of the time) or steps it by up
// to 4s either way.
func (s *snowSim) stepClock(n *snowNode) {
	if s.rng.IntN(4) == 0 {
		n.clock.set(0)
		s.logf("%s: clock set right", n.key)
		return
	}
	step := time.Duration(s.rng.IntN(8000)-4000) * time.Millisecond
	n.clock.off.Add(int64(step))
	s.logf("%s: clock steps %v", n.key, step)
}

// reboot is kill -9 of n, its clock back behind, and a start at once, half
// the time while ZooKeeper is down.
func (s *snowSim) reboot(n *snowNode) error {
	if s.world.attacks {
		if err := s.beforeReboot(n); err != nil {
			return err
		}
	}
	s.kill(n, false)
	if s.rng.IntN(2) == 0 {
		// ZooKeeper is down, and loses answers as it comes back.
		s.stall(6 * time.Second)
		s.faultMu.Lock()
		s.loseP = 0.5
		s.faultMu.Unlock()
		s.logf("ZooKeeper stalls for 6s, then loses half the answers to writes")
	}
	step := -time.Duration(s.rng.IntN(3000)) * time.Millisecond
	n.clock.off.Add(int64(step))
	s.logf("%s: reboots with its clock %v off", n.key, step)
	s.start(n)
	if s.world.attacks {
		return s.afterReboot(n)
	}
	return nil
}

func runSnowSim(t *testing.T, seed uint64, steps int, world snowWorld) (stats snowStats, err error) {
	t.Helper()
	defer simRuntime()()
	dir := t.TempDir()
	synctest.Test(t, func(*testing.T) {
		s := &snowSim{simZK: newSimZK(seed), world: world, rng: rand.New(rand.NewPCG(seed, 0x5f1a)), dir: dir,
			issued: simIssued{}, ticks: map[int64]map[string]*tickSpan{}, simTrace: simTrace{dir: dir},
			slots: snowNodes - 1, migrations: rand.New(rand.NewPCG(seed, 0x319))}
		for i := range snowNodes {
			s.keys++
			s.nodes = append(s.nodes, &snowNode{slot: i, key: fmt.Sprintf("k%d", s.keys), disk: s.newDisk(), clock: &simClock{origin: time.Now(), step: int64(world.readStep)}})
		}
		if world.paths {
			err = s.createCluster()
		}
		for _, n := range s.nodes {
			s.start(n)
		}
		synctest.Wait() // the starts settle before the first step, as every step does
		for s.stepNo = 1; s.stepNo <= steps && err == nil; s.stepNo++ {
			err = s.step()
			synctest.Wait()
		}
		s.healZK()
		for _, n := range s.nodes {
			if n.proc != nil {
				n.proc.dproc.Hang(0)
				n.proc.dproc.Fail(nil)
			}
		}
		s.endStranded()
		if err == nil {
			err = s.settle()
		}
		if err == nil && world.paths {
			err = s.pathsDone()
		}
		for _, n := range s.nodes {
			if n.proc != nil {
				s.stop(n)
			}
		}
		if synctestDebug {
			fmt.Println(strings.Join(s.trace, "\n"))
		}
		stats = s.stats
		stats.trace = s.trace
		time.Sleep(time.Minute) // the HTTP servers' idle-worker cleaners notice their stop (they sleep 10s)
	})
	return stats, err
}
