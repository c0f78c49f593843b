package fencing

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/clock/clocktest"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// The simulation: processes claim worker IDs, renew their ZooKeeper fence,
// persist their local fence and issue IDs with the real generator, against
// an in-memory ZooKeeper that is linearizable (one step at a time) and has
// versions, sessions, ephemeral leases and multi. A seeded scheduler
// interleaves their steps with faults: lost replies (the write applied, the
// answer lost), session expiries, partitions, pauses (a paused process
// keeps its state and resumes where it was), clock steps both ways,
// crashes with and without the disk, graceful stops. After every step that
// issues IDs the checker looks for an ID issued twice. Processes issue
// whenever their fences allow, in service or not: the worst case.

// Simulation timings (ms): G, the local fence lead, the largest clock step.
const (
	simG          = 300
	simFenceAhead = 100
	simMaxStep    = 2 * simG
	simWorkers    = 2 // worker IDs; two process slots compete for each
	simSlots      = 4
)

// simRules are the rules under test: the real ones, or a broken variant
// that the mutation test expects the simulation to catch.
type simRules struct {
	claim      func(prev Record, token string, now snowflake.UnixMilli, g time.Duration) Record
	renew      func(acked, now snowflake.UnixMilli, g time.Duration) snowflake.UnixMilli
	adopt      func(readWorker, ownWorker int64, readToken, ownToken string) bool
	startAfter func(claim Record, c Cache) (snowflake.UnixMilli, bool)
}

var realRules = simRules{claim: Claim, renew: Renew, adopt: Adopt, startAfter: StartAfter}

// simRec is a worker ID's forever znode.
type simRec struct {
	rec     Record
	version int32
}

// simZK is the in-memory ZooKeeper.
type simZK struct {
	recs     [simWorkers]simRec
	leases   [simWorkers]int64 // session holding the lease, 0 for none
	live     map[int64]bool    // sessions that exist
	nextSess int64
}

func (z *simZK) newSession() int64 {
	z.nextSess++
	z.live[z.nextSess] = true
	return z.nextSess
}

// expire ends a session: its ephemeral leases go.
func (z *simZK) expire(s int64) {
	delete(z.live, s)
	for w := range z.leases {
		if z.leases[w] == s {
			z.leases[w] = 0
		}
	}
}

// simDisk is a process slot's disk: its cache file.
type simDisk struct {
	used    bool
	token   string
	fence   snowflake.UnixMilli // local fence
	zkFence snowflake.UnixMilli // acknowledged for token
	session int64
}

// simProc is a process slot: a machine with a clock and a disk, running at
// most one process at a time.
type simProc struct {
	id     int
	worker int64
	clk    *clocktest.Fake
	disk   simDisk

	up, paused, reachable bool
	session               int64 // this process's ZooKeeper session (0: none)

	// claim in progress
	claimToken string
	readVer    int32
	haveRead   bool

	claimed  bool // holds a token it claimed or resumed with
	resumed  bool // resumed from the cache, not yet verified
	token    string
	version  int32
	acked    snowflake.UnixMilli
	local    snowflake.UnixMilli
	blocked  bool
	gen      *snowflake.Generator
	gate     *Gate
	startFrm snowflake.UnixMilli
}

func (p *simProc) now() snowflake.UnixMilli { return snowflake.UnixMilliNow(p.clk) }

// sim is one seeded run.
type sim struct {
	rules  simRules
	rng    *rand.Rand
	zk     *simZK
	procs  []*simProc
	layout snowflake.Layout
	issued map[int64]string // ID → who issued it, when
	trace  []string
	tokens int
	ids    int
}

func newSim(seed uint64, rules simRules) *sim {
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	l, err := snowflake.ParseLayout("41/1/21", snowflake.DefaultEpoch.Format(time.RFC3339), "1ms", start)
	if err != nil {
		panic(err)
	}
	s := &sim{rules: rules, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), layout: l,
		zk: &simZK{live: map[int64]bool{}}, issued: map[int64]string{}}
	for i := range simSlots {
		clk := clocktest.NewFake(start)
		clk.SetAutoStep(time.Microsecond) // a generator waiting for the next tick sees time pass
		s.procs = append(s.procs, &simProc{id: i, worker: int64(i % simWorkers), clk: clk, reachable: true})
	}
	return s
}

func (s *sim) logf(format string, a ...any) {
	s.trace = append(s.trace, fmt.Sprintf(format, a...))
}

func (s *sim) newToken() string {
	s.tokens++
	return "T" + strconv.Itoa(s.tokens)
}

// run executes steps; it returns a description of the first duplicate.
func (s *sim) run(steps int) string {
	for step := range steps {
		// Real time passes for every machine alike.
		d := time.Duration(s.rng.IntN(4)) * time.Millisecond // often 0: processes meet in one tick
		for _, p := range s.procs {
			p.clk.Advance(d)
		}
		p := s.procs[s.rng.IntN(len(s.procs))]
		if dup := s.act(step, p); dup != "" {
			return dup
		}
	}
	return ""
}

// act does one random thing with p.
func (s *sim) act(step int, p *simProc) string {
	r := s.rng.IntN(1000) // per mille
	switch {
	case r < 30: // clock step both ways, wall only
		off := time.Duration(s.rng.IntN(2*simMaxStep+1)-simMaxStep) * time.Millisecond
		p.clk.StepWall(off)
		s.logf("%d p%d clock step %v (now %d)", step, p.id, off, p.now())
	case r < 60:
		p.paused = !p.paused
		s.logf("%d p%d paused=%v", step, p.id, p.paused)
	case r < 100:
		p.reachable = !p.reachable
		s.logf("%d p%d reachable=%v", step, p.id, p.reachable)
	case r < 140: // the server expires some session
		if p.session != 0 && s.zk.live[p.session] {
			s.zk.expire(p.session)
			s.logf("%d p%d session %d expired", step, p.id, p.session)
		}
	case r < 155:
		if p.up {
			s.crash(step, p, s.rng.IntN(3) == 0)
		}
	case r < 160:
		if p.up && !p.paused {
			s.stop(step, p)
		}
	case p.paused:
	case !p.up:
		s.start(step, p)
	case !p.claimed:
		s.claim(step, p)
	case r < 400:
		s.persist(step, p)
	case r < 550:
		s.renew(step, p)
	default:
		return s.issue(step, p)
	}
	return ""
}

// start begins a process on p: claim through ZooKeeper, or resume from the
// disk when ZooKeeper cannot be reached.
func (s *sim) start(step int, p *simProc) {
	*p = simProc{id: p.id, worker: p.worker, clk: p.clk, disk: p.disk, up: true, reachable: p.reachable}
	if p.reachable {
		p.session = s.zk.newSession()
		p.claimToken = s.newToken()
		s.logf("%d p%d starts, session %d, claiming worker %d with %s", step, p.id, p.session, p.worker, p.claimToken)
		return
	}
	if !p.disk.used || p.disk.token == "" {
		p.up = false // refuses to start: no cache
		return
	}
	// Resume from the cache: the cached token, up to its acknowledged fence.
	p.token, p.acked, p.claimed, p.resumed = p.disk.token, p.disk.zkFence, true, true
	s.newGenerator(p, p.disk.fence, p.disk.zkFence)
	s.logf("%d p%d resumes from cache: %s, fence %d, zk fence %d", step, p.id, p.token, p.disk.fence, p.acked)
	s.persist(step, p)
}

// newGenerator builds the process's generator starting after floor.
func (s *sim) newGenerator(p *simProc, floor, zk snowflake.UnixMilli) {
	g, err := snowflake.NewGenerator(snowflake.Config{Layout: s.layout, WorkerID: p.worker, Clock: p.clk, NoRollbackTolerance: true, After: floor})
	if err != nil {
		panic(err)
	}
	p.gen, p.gate, p.startFrm = g, NewGate(g, zk), floor
}

// claim runs one round of Claim: read the forever znode, or commit the
// multi (version check + lease create) with a possibly lost answer.
func (s *sim) claim(step int, p *simProc) {
	z := s.zk
	if !p.reachable || !z.live[p.session] {
		if p.reachable && !z.live[p.session] {
			p.session = z.newSession()
		}
		return
	}
	rec := &z.recs[p.worker]
	if !p.haveRead {
		p.readVer, p.haveRead = rec.version, true
		// An earlier attempt of this claim committed and its answer was lost.
		if rec.rec.Token == p.claimToken && z.leases[p.worker] == p.session {
			s.finishClaim(step, p, rec.rec, rec.version)
		}
		return
	}
	p.haveRead = false
	if rec.version != p.readVer {
		return // changed since the read: start over
	}
	if l := z.leases[p.worker]; l != 0 {
		if l == p.disk.session && l != p.session {
			z.leases[p.worker] = 0 // the dead predecessor on this disk
			s.logf("%d p%d removed its disk's previous lease (session %d)", step, p.id, l)
		} else {
			return // held: wait
		}
	}
	next := s.rules.claim(rec.rec, p.claimToken, p.now(), simG*time.Millisecond)
	rec.rec, rec.version = next, rec.version+1
	z.leases[p.worker] = p.session
	s.logf("%d p%d claim committed: %+v v%d", step, p.id, next, rec.version)
	if s.rng.IntN(6) == 0 {
		s.logf("%d p%d claim answer lost", step, p.id)
		return
	}
	s.finishClaim(step, p, next, rec.version)
}

// finishClaim is the node's side of a successful claim: the start floor,
// the generator, the first local fence (on disk with the new token before
// anything is issued).
func (s *sim) finishClaim(step int, p *simProc, r Record, version int32) {
	floor, fromCache := s.rules.startAfter(r, Cache{Matches: p.disk.used, Token: p.disk.token, Fence: p.disk.fence})
	p.token, p.version, p.acked, p.claimed = r.Token, version, r.Fence, true
	s.newGenerator(p, floor, r.Fence)
	s.logf("%d p%d claimed %s: floor %d (from cache %v), zk fence %d", step, p.id, p.token, floor, fromCache, p.acked)
	s.persist(step, p)
}

// persist is the fence keeper: the local fence to disk (with the token and
// the fence acknowledged for it), then to the generator.
func (s *sim) persist(step int, p *simProc) {
	if p.gate == nil {
		return
	}
	p.local = max(p.local, p.startFrm, p.now()+simFenceAhead, p.gate.LastIssued())
	p.disk = simDisk{used: true, token: p.token, fence: p.local, zkFence: p.acked, session: p.session}
	p.gate.SetFence(p.local)
}

// renew is the coordinator's round: re-lease after a session expiry,
// verify after a resume, renew the fence; conflicts go through adopt.
func (s *sim) renew(step int, p *simProc) {
	z := s.zk
	if !p.reachable || p.blocked {
		return
	}
	if !z.live[p.session] {
		p.session = z.newSession()
	}
	rec := &z.recs[p.worker]
	if p.resumed {
		if s.rules.adopt(p.worker, p.worker, rec.rec.Token, p.token) {
			p.version, p.acked, p.resumed = rec.version, max(p.acked, rec.rec.Fence), false
			p.gate.SetZKFence(p.acked)
			s.logf("%d p%d resume verified", step, p.id)
		} else if z.leases[p.worker] == 0 || z.leases[p.worker] == p.disk.session {
			// Claim afresh: commit, raise the floor, then the new fence.
			token := s.newToken()
			next := s.rules.claim(rec.rec, token, p.now(), simG*time.Millisecond)
			rec.rec, rec.version = next, rec.version+1
			z.leases[p.worker] = p.session
			if err := p.gate.RaiseFloor(next.PrevFence); err != nil {
				panic(err)
			}
			p.token, p.version, p.acked, p.resumed = token, rec.version, next.Fence, false
			p.gate.SetZKFence(next.Fence)
			s.logf("%d p%d re-claimed after resume: %+v", step, p.id, next)
		}
		return
	}
	if z.leases[p.worker] != p.session {
		// Re-lease: a version check of our znode plus the lease create.
		if rec.version == p.version && z.leases[p.worker] == 0 {
			z.leases[p.worker] = p.session
			return
		}
		s.conflict(step, p)
		return
	}
	if rec.version != p.version {
		s.conflict(step, p)
		return
	}
	fence := s.rules.renew(p.acked, p.now(), simG*time.Millisecond)
	rec.rec.Fence, rec.version = fence, rec.version+1
	if s.rng.IntN(5) == 0 {
		s.logf("%d p%d renewal to %d applied, answer lost", step, p.id, fence)
		return
	}
	p.version, p.acked = rec.version, fence
	p.gate.SetZKFence(fence)
}

// conflict re-reads after a failed version check: adopt our own write, or
// stop renewing for good.
func (s *sim) conflict(step int, p *simProc) {
	rec := &s.zk.recs[p.worker]
	if s.rules.adopt(p.worker, p.worker, rec.rec.Token, p.token) {
		p.version, p.acked = rec.version, max(p.acked, rec.rec.Fence)
		p.gate.SetZKFence(p.acked)
		return
	}
	p.blocked = true
	s.logf("%d p%d blocked: worker %d now held by %s", step, p.id, p.worker, rec.rec.Token)
}

// issue asks the generator for a few IDs and checks them.
func (s *sim) issue(step int, p *simProc) string {
	if p.gen == nil {
		return ""
	}
	ids, err := p.gen.NextN(1 + s.rng.IntN(5))
	if err != nil {
		return ""
	}
	for _, id := range ids {
		who := fmt.Sprintf("p%d (%s) at step %d", p.id, p.token, step)
		if prev, dup := s.issued[id]; dup {
			parts, _ := s.layout.Decode(id)
			return fmt.Sprintf("ID %d (worker %d, tick %d, sequence %d) issued by %s and by %s",
				id, parts.WorkerID, parts.Tick, parts.Sequence, prev, who)
		}
		s.issued[id] = who
		s.ids++
	}
	return ""
}

// crash is kill -9: the session lives on until it expires; the disk stays
// unless lost.
func (s *sim) crash(step int, p *simProc, loseDisk bool) {
	p.up, p.claimed, p.gen, p.gate = false, false, nil, nil
	if loseDisk {
		p.disk = simDisk{}
	}
	s.logf("%d p%d crashed (disk lost: %v)", step, p.id, loseDisk)
}

// stop is a graceful stop: freeze, final fence to ZooKeeper (if it can),
// lease released, session closed, final fence to disk.
func (s *sim) stop(step int, p *simProc) {
	if p.gate == nil {
		p.up = false
		return
	}
	last := p.gate.Freeze()
	// The cache file first: its copy of the ZooKeeper fence comes down
	// before ZooKeeper's (a start with ZooKeeper down may issue up to it).
	p.disk.fence, p.disk.zkFence = last, min(p.disk.zkFence, last)
	z := s.zk
	rec := &z.recs[p.worker]
	if s.rng.IntN(4) != 0 && p.reachable && z.live[p.session] && !p.blocked && rec.version == p.version && z.leases[p.worker] == p.session {
		rec.rec.Fence, rec.version = last, rec.version+1
		z.expire(p.session)
	}
	p.up, p.claimed, p.gen, p.gate = false, false, nil, nil
	s.logf("%d p%d stopped at %d", step, p.id, last)
}

// simSeeds returns the seeds to run: SIM_SEED=N replays one; SIM_SEEDS=N
// sets how many (default n).
func simSeeds(t *testing.T, n int) []uint64 {
	t.Helper()
	if v := os.Getenv("SIM_SEED"); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("SIM_SEED=%q: %v", v, err)
		}
		return []uint64{seed}
	}
	if v := os.Getenv("SIM_SEEDS"); v != "" {
		k, err := strconv.Atoi(v)
		if err != nil || k < 1 {
			t.Fatalf("SIM_SEEDS=%q: want a positive count", v)
		}
		n = k
	}
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = uint64(i + 1)
	}
	return seeds
}

const simSteps = 1500

func TestSimulation_NoDuplicateUnderSeededFaults(t *testing.T) {
	seeds := simSeeds(t, 2000)
	var ids, tokens int
	began := time.Now()
	for _, seed := range seeds {
		s := newSim(seed, realRules)
		if dup := s.run(simSteps); dup != "" {
			tail := s.trace[max(len(s.trace)-simTraceTail(), 0):]
			t.Fatalf("seed %d (replay: SIM_SEED=%d go test -run Simulation ./fencing/): %s\nlast events:\n%s",
				seed, seed, dup, strings.Join(tail, "\n"))
		}
		ids += s.ids
		tokens += s.tokens
	}
	if ids == 0 || tokens < len(seeds) {
		t.Fatalf("the simulation exercised nothing: %d IDs, %d claims over %d seeds", ids, tokens, len(seeds))
	}
	t.Logf("%d seeds x %d steps: %d IDs issued, %d claims, no duplicate (%v)", len(seeds), simSteps, ids, tokens, time.Since(began).Round(time.Millisecond))
}

// The simulation must be able to fail: with a rule broken on purpose it
// finds a duplicate within a few hundred seeds. (The claim that forgets the
// previous fence and the cache file trusted whatever its token are rows of
// the mutation table: fencing/mutation_test.go.)
func TestSimulation_CatchesBrokenRules(t *testing.T) {
	tests := []struct {
		name  string
		rules simRules
	}{
		{"a conflicting write is adopted as our own", simRules{
			claim: Claim, renew: Renew, startAfter: StartAfter,
			adopt: func(readWorker, ownWorker int64, _, _ string) bool { return readWorker == ownWorker }}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 500; seed++ {
				if dup := newSim(seed, tc.rules).run(simSteps); dup != "" {
					t.Logf("found at seed %d: %s", seed, dup)
					return
				}
			}
			t.Fatal("no duplicate found in 500 seeds: the simulation cannot tell this broken rule from the real one")
		})
	}
}

// simTraceTail is how many events a failure shows: SIM_TRACE=N, default 40.
func simTraceTail() int {
	if n, err := strconv.Atoi(os.Getenv("SIM_TRACE")); err == nil && n > 0 {
		return n
	}
	return 40
}
