package node

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/disk"
	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
	"codeberg.org/snowflaked/snowflaked/internal/zkconn"
	"codeberg.org/snowflaked/snowflaked/internal/zkconn/zkmem"
	"codeberg.org/snowflaked/snowflaked/segment"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// The segment simulation runs the shipped segment mode (the node's
// segmentMode: its start, resume, run and stop; the segment service and
// its state file; the ZooKeeper store, segment.ZKStore) for several nodes against
// an in-memory ZooKeeper that loses requests and answers, stalls and
// expires sessions, on in-memory disks that hang and die with their
// process, in virtual time (testing/synctest). It kills, stops and
// restarts nodes at random and checks, on what the code did:
//
//   - no dense ID is handed out twice, and IDs increase within a process;
//   - no range in ZooKeeper's returned/ holds an issued ID, none twice;
//   - a clean stop with ZooKeeper answering ends clean within its deadline;
//   - what was lost (allocated, neither issued nor returned) stays within
//     what docs/segments.md allows each crash, stop and unknown outcome.
//
// SIM_SEED=n replays one seed (each step settles before the next, every
// timer is armed through the world's clock.Apart, and a request's fault
// depends on its client (the process, which of its dials, which session of
// that client), what it asks and how often that session asked it, not on
// goroutine order; TestSimulation_Replays checks that two runs of a seed
// leave one trace); SIM_SEEDS=n sets
// how many seeds run (default 1000, 50 under the race detector);
// SIM_STEPS=n how many steps each runs.

const (
	simCluster = "simc"
	simTag     = "t"
	simStep    = 100
	simTop     = 400
	simNodes   = 3
	simMaxTake = 20

	simStateFile = "/var/lib/snowflaked/cache.segments"
)

func simSeeds(t *testing.T) []uint64 {
	t.Helper()
	if s := os.Getenv("SIM_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SIM_SEED=%q: %v", s, err)
		}
		return []uint64{seed}
	}
	n := 1000
	if testsupport.RaceEnabled {
		n = 50
	}
	if s := os.Getenv("SIM_SEEDS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("SIM_SEEDS=%q: want a positive count", s)
		}
		n = v
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(i + 1)
	}
	return out
}

func simSteps(t *testing.T) int {
	t.Helper()
	if s := os.Getenv("SIM_STEPS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("SIM_STEPS=%q: want a positive count", s)
		}
		return v
	}
	return 300
}

func TestSimulation_Segments(t *testing.T) {
	steps := simSteps(t)
	for _, seed := range simSeeds(t) {
		if err := runSegmentSim(t, seed, steps, worldPlain); err != nil {
			t.Fatalf("seed %d (replay: SIM_SEED=%d go test -run TestSimulation_Segments ./node/): %v", seed, seed, err)
		}
	}
}

// TestSimulation_SegmentsTagRecreated runs the simulation with the tag
// deleted and created again now and then (healed first: every live node
// connected, no dead node's state file listing a range, as the runbook
// asks): within 2s of the delete no live node holds a range of the old
// tag (ZooKeeper's watch), and the new tag's books close as the plain
// run's do, no number of it handed out twice. A fifth of the plain run's
// seeds.
func TestSimulation_SegmentsTagRecreated(t *testing.T) {
	steps := simSteps(t)
	seeds := simSeeds(t)
	if len(seeds) > 1 {
		seeds = seeds[:max(len(seeds)/5, 1)]
	}
	for _, seed := range seeds {
		if err := runSegmentSim(t, seed, steps, worldRecreate); err != nil {
			t.Fatalf("seed %d (replay: SIM_SEED=%d go test -run TestSimulation_SegmentsTagRecreated ./node/): %v", seed, seed, err)
		}
	}
}

// TestSimulation_SegmentsOpaque runs the simulation on an opaque tag:
// every number handed out must be one of the permutation under the tag's
// key (never the raw counter, whatever path its range took: a load, a
// resumed state file, a returned range), and the counters behind them obey
// every rule of the plain run. A fifth of the plain run's seeds.
func TestSimulation_SegmentsOpaque(t *testing.T) {
	steps := simSteps(t)
	seeds := simSeeds(t)
	if len(seeds) > 1 {
		seeds = seeds[:max(len(seeds)/5, 1)]
	}
	for _, seed := range seeds {
		if err := runSegmentSim(t, seed, steps, worldOpaque); err != nil {
			t.Fatalf("seed %d (replay: SIM_SEED=%d go test -run TestSimulation_SegmentsOpaque ./node/): %v", seed, seed, err)
		}
	}
}

// TestSimulation_SegmentsReset runs the simulation on a daily reset tag
// ({date}{seq:6} in UTC) while the virtual clock crosses several midnights,
// the nodes serving through segment.Service.TakePeriod, the path the
// server's answers take. Per period, no number is handed out twice and
// every number is at least the tag's start and fits the format; every
// answer prints as the format says, with its period's date; a node's
// periods never go back (per disk) and are the periods of its clock during
// the take; and the counter values behind the numbers (number - start +
// the period's base, which never changes once started) obey every rule of
// the plain run. A fifth of the plain run's seeds.
func TestSimulation_SegmentsReset(t *testing.T) {
	steps := simSteps(t)
	seeds := simSeeds(t)
	if len(seeds) > 1 {
		seeds = seeds[:max(len(seeds)/5, 1)]
	}
	for _, seed := range seeds {
		if err := runSegmentSim(t, seed, steps, worldReset); err != nil {
			t.Fatalf("seed %d (replay: SIM_SEED=%d go test -run TestSimulation_SegmentsReset ./node/): %v", seed, seed, err)
		}
	}
}

// segWorld is what the simulated world does beside the faults every run
// has.
type segWorld int

const (
	// worldPlain: a plain tag.
	worldPlain segWorld = iota
	// worldOpaque: the tag is opaque (6 digits).
	worldOpaque
	// worldRecreate: now and then the tag is deleted and created again
	// (segment delete, segment create).
	worldRecreate
	// worldReset: the tag is a daily reset tag (UTC, {date}{seq:6}) and
	// the virtual clock crosses several midnights (simReset).
	worldReset
)

// simZK is a simulation's ZooKeeper and the faults it injects: a
// request's fate depends on the seed, its session and its number within
// the session, not on which goroutine ran first.
type simZK struct {
	srv  *zkmem.Server
	seed uint64

	faultMu   sync.Mutex
	loseP     float64 // per write: applied, answer lost
	dropP     float64 // per request: lost before applied
	slowP     float64 // per request: answer delayed up to 3s
	movedP    float64 // per request: its session moved (not applied, zk.ErrSessionMoved)
	lateP     float64 // per request: applied, answered 2-5s later (after the caller gave up)
	stallTill time.Time
	calm      map[int64]bool      // sessions whose requests are only delayed (an operator's)
	perPath   map[simReq]simAsked // requests so far, by session, op and path
	cut       map[int64]time.Time // sessions cut off from ZooKeeper, until

	// sched arms every timer of the world (the processes', zkmem's, the
	// disks', the steps' own): no two fire at one virtual instant, so a
	// seed replays (docs/testing.md, Replaying a seed).
	sched *clock.Apart
}

// simRuntime sets the runtime up for one simulated world until the func it
// returns: one thread, so the bubble's goroutines never run at once, and
// no garbage collection, whose stop of the world sends the goroutine it
// stops to the back of the run queue and so reorders goroutines that were
// runnable together at a moment that depends on the machine (a world
// allocates a few hundred MB at most; the collector runs before it and
// resumes after).
func simRuntime() (restore func()) {
	procs := runtime.GOMAXPROCS(1)
	runtime.GC()
	gc := debug.SetGCPercent(-1)
	return func() {
		debug.SetGCPercent(gc)
		runtime.GOMAXPROCS(procs)
	}
}

// bg is the context the world's processes and operators run under: its
// timers go through the world's schedule.
func (z *simZK) bg() context.Context { return clock.WithSchedule(context.Background(), z.sched) }

// after is time.After on the world's schedule: the timer stops when the
// step ends (t.Cleanup is too late: a step must not leave it armed).
func (z *simZK) after(d time.Duration) *clock.Timer { return clock.NewTimer(z.bg(), d) }

// pause sleeps a step's pause d (on the world's schedule).
func (z *simZK) pause(d time.Duration) { clock.Sleep(z.bg(), d) }

// newDisk is a machine's disk, its hung writes timed by the world's
// schedule.
func (z *simZK) newDisk() *disk.Mem {
	m := disk.NewMem()
	m.SetSchedule(z.sched)
	return m
}

// simReq names what a request asks, within its session: its fate depends
// on that and on how many such requests the session sent before, not on
// its place among the session's other requests, which goroutines of one
// process sending at one virtual instant may take in any order. Requests
// of one kind sent at one instant count once and share one fate: which of
// two goroutines (a tag's poll and a Take's load reading the tag) asked
// first must not decide which of them meets the fault.
type simReq struct {
	client   string // simClient: the process, its dial and session, not zkmem's session ID
	op, path string
}

// simAsked counts the virtual instants at which a session sent a request
// of one kind, and remembers the last.
type simAsked struct {
	n  uint64
	at time.Time
}

// simClient names a request's session by the simulated process, which of
// its clients, and which of that client's sessions (Conn.SetLabel in
// dialer), not by zkmem's session ID, which counts Connects in the order
// processes that dial at one virtual instant happened to run.
func simClient(r zkmem.Request) string {
	if r.Client == "" {
		return fmt.Sprintf("session %x", r.Session)
	}
	return fmt.Sprintf("%s#%d", r.Client, r.Renewal)
}

// simOffset is how long after a virtual instant a request of client
// reaches the server: requests of several sessions sent at one instant
// arrive in an order fixed by their clients' names.
func simOffset(client string) time.Duration {
	return time.Microsecond + time.Duration(strHash(client)%1_000_000)
}

func newSimZK(seed uint64) *simZK {
	z := &simZK{srv: zkmem.New(), seed: seed, perPath: map[simReq]simAsked{}, sched: clock.NewApart()}
	z.srv.SetInjector(z.inject)
	z.srv.SetSchedule(z.sched)
	return z
}

// segSim is one seed's world.
type segSim struct {
	*simZK
	rng   *rand.Rand
	nodes []*simNode
	world segWorld

	issued simIssued // ID → the process that issued it (an opaque tag's: its counter), of the current tag
	// buried are the numbers issued by the tag's deleted incarnations
	// (worldRecreate): a tag created again over their tombstone never
	// hands one out again (R8).
	buried simIssued
	// recreates draws when the tag is deleted and created again
	// (worldRecreate), apart from rng so the other draws stay the same.
	recreates *rand.Rand
	// zkEvents draws ZooKeeper's restores to a snapshot and the
	// operator's set-max, apart from rng too.
	zkEvents *rand.Rand
	snap     *zkmem.Snapshot // taken a few steps ago, for a restore
	snapStep int
	// wentBack: ZooKeeper forgot allocations (a restore) and the operator
	// has not raised max_id back to forgotten yet; sawWentBack: a store
	// refused the record (ErrWentBack), the operator's cue.
	wentBack    bool
	forgotten   int64
	sawWentBack atomic.Bool
	skipped     []segment.Range // the IDs set-max skipped: never allocated

	incarnation string // the cluster's

	// A reset tag's books (worldReset), kept apart from the counter's.
	reset simReset

	lostBase int64                // the stores' PossiblyLost when the current tag was created
	perm     *segment.Permutation // an opaque tag's (nil: plain)

	// allowance is what the docs let the crashes and stops so far lose.
	allowance int64
	stores    []*segment.ZKStore // every store a process opened
	simTrace
}

type simNode struct {
	name  string
	disk  *disk.Mem
	known bool // the node ran before on this disk: it knows the incarnation
	// period is the newest period a process on this disk answered in
	// (worldReset): its periods never go back. skew is how far the
	// machine's clock, which picks the periods, is off virtual time:
	// within a second either way, under the clock checks' tolerance.
	period string
	skew   time.Duration
	proc   *simProc
	procs  int
}

type simProc struct {
	name   string
	mode   *segmentMode
	dproc  *disk.Proc
	cancel context.CancelFunc
	done   chan struct{}
	last   int64
	zk     simClients
	ws     atomic.Pointer[watchedStore]
}

// simTrace is a simulation's log of what happened, shown with the last
// steps when an invariant breaks. It holds only what a seed decides —
// virtual time, the steps, the IDs handed out, the errors — so that two
// runs of one seed leave the same trace (TestSimulation_Replays compares
// their sums).
type simTrace struct {
	trace  []string
	stepNo int
	// dir is a directory of the real file system the run uses (its name
	// differs from run to run): the trace says $DIR instead.
	dir string
}

// sum is the sha256 of the trace's lines.
func (s *simTrace) sum() [sha256.Size]byte {
	h := sha256.New()
	for _, l := range s.trace {
		h.Write([]byte(l))
		h.Write([]byte{'\n'})
	}
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

func (s *simTrace) logf(format string, a ...any) {
	s.trace = append(s.trace, fmt.Sprintf("%9.3fs ", float64(time.Now().UnixNano()%1e12)/1e9)+s.scrub(fmt.Sprintf(format, a...)))
	if synctestDebug {
		fmt.Fprintln(os.Stderr, s.trace[len(s.trace)-1])
	}
}

func (s *simTrace) fail(format string, a ...any) error {
	tail := s.trace[max(len(s.trace)-40, 0):]
	return fmt.Errorf("step %d: %s\nlast steps:\n  %s", s.stepNo, s.scrub(fmt.Sprintf(format, a...)), strings.Join(tail, "\n  "))
}

// scrub puts $DIR for the run's directory in a line.
func (s *simTrace) scrub(line string) string {
	// A product message may name a zkmem session ID (a lease holder's):
	// those count Connects in the order processes that dial at one
	// virtual instant ran, so the trace says which it is not.
	line = zkmemSession.ReplaceAllString(line, "0x5e55....")
	if s.dir == "" {
		return line
	}
	return strings.ReplaceAll(line, s.dir, "$DIR")
}

// zkmemSession matches a zkmem session ID as the product prints it.
var zkmemSession = regexp.MustCompile(`0x5e55[0-9a-f]{4}\b`)

// simIssued is every ID a simulation saw handed out, by the process that
// did.
type simIssued map[int64]string

// record adds id, issued by proc whose previous ID was *last: it must be
// above *last and never issued before.
func (m simIssued) record(tr *simTrace, kind, proc string, last *int64, id int64) error {
	if id <= *last {
		return tr.fail("%s issued %d after %d: IDs must increase within a process", proc, id, *last)
	}
	*last = id
	if prev, dup := m[id]; dup {
		return tr.fail("%s ID %d issued twice: by %s and by %s", kind, id, prev, proc)
	}
	m[id] = proc
	return nil
}

// simClients are one simulated process's ZooKeeper clients.
type simClients struct {
	mu    sync.Mutex
	conns []*zkmem.Conn
	dead  bool
	// cutTill: the process is cut off from ZooKeeper till then (cutBy's
	// cutOff), new clients too.
	cutTill time.Time
	cutBy   *simZK
}

// dialer opens clients on srv until the process is dead; each is labelled
// with name and its number among the process's clients (simClient).
func (c *simClients) dialer(srv *zkmem.Server, name string) zkconn.Dialer {
	return func(_ []string, opt zkconn.Options) (zkconn.Conn, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.dead {
			return nil, errors.New("process killed")
		}
		conn := srv.Connect(opt)
		conn.SetLabel(fmt.Sprintf("%s/dial%d", name, len(c.conns)))
		c.conns = append(c.conns, conn)
		if c.cutBy != nil && time.Now().Before(c.cutTill) {
			c.cutBy.cutSession(conn, c.cutTill)
		}
		return conn, nil
	}
}

// end marks the process dead: its clients vanish (kill -9: the sessions
// expire after their timeout) or close (a clean exit).
func (c *simClients) end(vanish bool) {
	c.mu.Lock()
	c.dead = true
	conns := c.conns
	c.mu.Unlock()
	for _, conn := range conns {
		if vanish {
			conn.Vanish()
		} else {
			conn.Close()
		}
	}
}

// pick returns one of the clients (nil when none), by r.
func (c *simClients) pick(r *rand.Rand) *zkmem.Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.conns) == 0 {
		return nil
	}
	return c.conns[r.IntN(len(c.conns))]
}

// latest returns the newest client (nil when none).
func (c *simClients) latest() *zkmem.Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.conns) == 0 {
		return nil
	}
	return c.conns[len(c.conns)-1]
}

var synctestDebug bool

func simLog() zerolog.Logger {
	if synctestDebug {
		return zerolog.New(os.Stderr).Level(zerolog.InfoLevel)
	}
	return zerolog.Nop()
}

// mix is splitmix64: a request's fate depends on the seed, its session,
// what it asks and how many times the session asked it before, not on
// which goroutine ran first.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// strHash is FNV-1a: a request's op and path as a number for mix.
func strHash(v string) uint64 {
	h := uint64(14695981039346656037)
	for i := range len(v) {
		h = (h ^ uint64(v[i])) * 1099511628211
	}
	return h
}

func (s *simZK) inject(r zkmem.Request) zkmem.Fault {
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	client := simClient(r)
	if f, ok := cutFault(s.cut[r.Session]); ok {
		f.Delay = simOffset(client)
		return f
	}
	k := simReq{client, r.Op, r.Path}
	if a := s.perPath[k]; a.n == 0 || !a.at.Equal(time.Now()) {
		s.perPath[k] = simAsked{n: a.n + 1, at: time.Now()}
	}
	h := mix(s.seed ^ mix(strHash(client)) ^ mix(s.perPath[k].n<<8) ^ mix(strHash(r.Op+" "+r.Path)))
	u := func() float64 { h = mix(h); return float64(h>>11) / (1 << 53) }
	var f zkmem.Fault
	if now := time.Now(); now.Before(s.stallTill) {
		f.Delay = s.stallTill.Sub(now)
	} else if u() < s.slowP {
		f.Delay = time.Duration(u() * float64(3*time.Second))
	}
	write := r.Op == "create" || r.Op == "set" || r.Op == "delete" || r.Op == "multi"
	calm := s.calm[r.Session]
	switch {
	case calm:
	case u() < s.dropP:
		f.Kind, f.Down = zkmem.Drop, time.Duration(u()*float64(2*time.Second))
	case write && u() < s.loseP:
		f.Kind, f.Down = zkmem.LoseAnswer, time.Duration(u()*float64(6*time.Second))
	}
	if f.Kind == zkmem.Pass && !calm && (s.movedP > 0 || s.lateP > 0) {
		switch {
		case u() < s.movedP:
			f.Kind, f.Down = zkmem.SessionMoved, time.Duration(u()*float64(time.Second))
		case u() < s.lateP:
			f.Kind, f.Hold = zkmem.LateAnswer, 2*time.Second+time.Duration(u()*float64(3*time.Second))
		}
	}
	// Requests sent at one virtual instant by several sessions reach the
	// server in an order fixed by their clients' names (simOffset), not
	// in the order the scheduler happened to run their goroutines: a seed
	// replays the same run.
	f.Delay += simOffset(client)
	return f
}

func newSegSim(seed uint64, world segWorld) (*segSim, error) {
	s := &segSim{simZK: newSimZK(seed), rng: rand.New(rand.NewPCG(seed, 0x5e9)), world: world, issued: simIssued{},
		recreates: rand.New(rand.NewPCG(seed, 0x7a9)), zkEvents: rand.New(rand.NewPCG(seed, 0x2e5))}
	if err := s.setupZK("sim-incarnation"); err != nil {
		return nil, err
	}
	for i := range simNodes {
		s.nodes = append(s.nodes, &simNode{name: fmt.Sprintf("n%d", i), disk: s.newDisk()})
	}
	if world == worldReset {
		if err := s.reset.init(seed); err != nil {
			return nil, err
		}
		for _, n := range s.nodes {
			n.skew = time.Duration(s.reset.nights.Int64N(int64(2*time.Second))) - time.Second
		}
		s.toMidnight() // the bubble starts at a midnight: the first nodes start a little before the next
	}
	return s, nil
}

// setupZK creates the cluster, of incarnation inc, and the tag on an
// empty ZooKeeper, without faults.
func (s *segSim) setupZK(inc string) error {
	s.incarnation = inc
	s.srv.SetInjector(nil)
	defer s.srv.SetInjector(s.inject)
	admin := s.srv.Connect(zkconn.Options{SessionTimeout: 10 * time.Second})
	defer admin.Close()
	cluster, err := json.Marshal(snowflake.DefaultLayout())
	if err != nil {
		return err
	}
	cluster = append(cluster[:len(cluster)-1], `,"incarnation":"`+inc+`"}`...)
	if _, err := admin.Create("/snowflaked", nil, zk.FlagPersistent, nil); err != nil {
		return err
	}
	if _, err := admin.Create("/snowflaked/"+simCluster, cluster, zk.FlagPersistent, nil); err != nil {
		return err
	}
	st, err := segment.OpenZK(s.bg(), s.segConfig(s.srv.Dial))
	if err != nil {
		return err
	}
	defer st.Close()
	tag := segment.Tag{Name: simTag, Start: 1, Step: simStep, MaxStep: simTop}
	if s.world == worldOpaque {
		tag.Opaque = &segment.Opaque{Digits: 6}
	}
	if s.world == worldReset {
		tag.Reset = &simResetRule
	}
	if err := st.Create(s.bg(), tag); err != nil {
		return err
	}
	if tag.Opaque != nil {
		t, err := st.Tag(s.bg(), simTag)
		if err != nil {
			return err
		}
		key, err := st.Key(s.bg(), simTag, t.Incarnation)
		if err != nil {
			return err
		}
		if s.perm, err = segment.NewPermutation(*tag.Opaque, key); err != nil {
			return err
		}
	}
	return nil
}

func (s *segSim) segConfig(dial zkconn.Dialer) segment.ZKConfig {
	// A ZooKeeper call times out before the 2s a Take waits for a range
	// (segment.defaultWait, which also bounds a tag's first read): two
	// timers of one process never fire at one virtual instant, where the
	// scheduler would pick which error a failed Take reports.
	return segment.ZKConfig{Servers: []string{"127.0.0.1:2181"}, Cluster: simCluster, Timeout: 1900 * time.Millisecond,
		Log: simLog(), Dial: dial}
}

// start runs a new process of n on its disk, as the node does: resume the
// state file when the incarnation is known, then open the store.
func (s *segSim) start(n *simNode) {
	n.procs++
	p := &simProc{name: fmt.Sprintf("%s/%d", n.name, n.procs), dproc: n.disk.Process(), done: make(chan struct{})}
	dial := p.zk.dialer(s.srv, p.name)
	p.mode = &segmentMode{cfg: s.segConfig(dial), file: simStateFile, node: n.name, log: simLog(), disk: p.dproc, sched: s.sched}
	p.mode.wrapStore = func(st segment.Store) segment.Store {
		w := &watchedStore{Store: st, wentBack: &s.sawWentBack}
		p.ws.Store(w)
		return w
	}
	if s.world == worldReset {
		skew := n.skew
		p.mode.periodClock = func() (time.Time, error) { return time.Now().Add(skew), nil }
	}
	inc := ""
	if n.known {
		inc = s.incarnation // from its cache file, or --accept-new-incarnation after a rebuild
	}
	if !p.mode.resume(inc) {
		s.logf("%s: cannot resume its state file", p.name)
	}
	ctx, cancel := context.WithCancel(s.bg())
	p.cancel = cancel
	go func() { defer close(p.done); p.mode.run(ctx) }()
	n.proc, n.known = p, true
	s.logf("%s: start", p.name)
}

// kill is kill -9: nothing the process does later reaches its disk or
// ZooKeeper; its session expires after the timeout. It checks what the
// crash lost against R2's bound: the IDs held in memory that the state file
// no longer lists are at most the mark's chunk, plus the newest range when
// the crash fell between its grant and the file write that records it.
func (s *segSim) kill(n *simNode, wipe bool) error {
	s.settle()
	p := n.proc
	var held []segment.Range
	var ahead, wasted int64
	if st := p.mode.Status(); len(st) > 0 {
		// The mark moves by a chunk, or by a waiting Take's count; a write
		// that landed before the kill may not show in Ahead yet.
		held, ahead = st[0].Held, max(st[0].Ahead, st[0].Chunk, simMaxTake)
		// A reset tag's ranges below a new period's base, dropped (R9):
		// out of Held, never served.
		wasted = st[0].Wasted
	}
	writing := p.dproc.Writing() || p.dproc.LastFailed() // a range's file write under way, or failed and not yet redone
	p.dproc.Kill()
	p.zk.end(true)
	p.cancel()
	<-p.done
	if svc := p.mode.svc.Load(); svc != nil {
		_ = svc.Abandon() // stops the goroutines; its write fails: the disk is gone
	}
	s.noteStore(p)
	onDisk, err := s.stateFile(n)
	if err != nil {
		return err
	}
	lost := countNotIn(held, onDisk)
	allowed := ahead
	if k := len(held); k > 0 && writing && countNotIn(held[k-1:], onDisk) > 0 {
		allowed += held[k-1].Len() // the newest range, granted, its file write under way
	}
	if lost > allowed {
		return s.fail("%s: kill -9 lost %d IDs (held %v, state file %v, a write under way: %v): more than the mark's chunk (%d) and a range whose file write was under way",
			p.name, lost, held, onDisk, writing, ahead)
	}
	s.allowance += lost + wasted
	if w := p.watched(); w != nil {
		// Writes in flight at the kill: a grant whose answer the process
		// never saw, a return that left the state file.
		s.allowance += w.inflight.Load()
	}
	if wipe {
		s.allowance += countNotIn(onDisk, nil)
		n.disk.Wipe()
		n.known, n.period = false, ""
	}
	n.proc = nil
	s.logf("%s: kill -9 (disk wiped: %v), lost %d", p.name, wipe, lost)
	return nil
}

// stateFile reads n's state file: the tag's unissued ranges (none when
// there is no file).
func (s *segSim) stateFile(n *simNode) ([]segment.Range, error) {
	b, ok := n.disk.File(simStateFile)
	if !ok {
		return nil, nil
	}
	var st struct {
		Tags map[string]struct {
			Ranges []segment.Range `json:"ranges"`
		} `json:"tags"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, s.fail("%s: state file: %v", n.name, err)
	}
	return st.Tags[simTag].Ranges, nil
}

// countNotIn counts the IDs of rs that no range of in holds.
func countNotIn(rs, in []segment.Range) int64 {
	var n int64
	for _, r := range rs {
		n += r.Len()
		for _, o := range in {
			if lo, hi := max(r.Lo, o.Lo), min(r.Hi, o.Hi); lo < hi {
				n -= hi - lo
			}
		}
	}
	return n
}

func (s *segSim) noteStore(p *simProc) {
	if st := p.mode.store.p.Load(); st != nil {
		s.stores = append(s.stores, st)
	}
}

// settle waits until what the world's last action set off (a Take's kick
// of its loaders, a stop's end of a session) has run as far as it can at
// this virtual instant, so that the next action, at the same instant,
// finds the same world in every run. Without it the order of the two
// is the runtime's, which real time moves (a goroutine that ran 10ms is
// preempted and queued behind the others): under load a loader that a
// Take kicked starts its load before the stop that follows closes the
// service in some runs and not in others (a range more allocated and
// returned, the stop 2ms later).
// Each step settles before the next (runSegmentSimTrace); the actions of
// one step (finish's takes and stops, a night's stops, the takes during a
// stop) settle here.
func (s *segSim) settle() { synctest.Wait() }

// stop is the node's clean stop: segment mode gets its half of a 10s
// --shutdown-timeout.
// killDuringStop starts a clean stop and kills the process after "after"
// (the stop may have finished by then): R3 says such a crash loses the
// ranges between the state file and ZooKeeper, never puts one in both.
// The IDs it held count as allowed losses; the duplicate and returned-range
// checks judge it.
func (s *segSim) killDuringStop(n *simNode, after time.Duration) {
	s.settle()
	p := n.proc
	var held int64
	for _, ts := range p.mode.Status() {
		held += ts.Available + ts.Wasted // a reset tag's ranges dropped below a period's base too
	}
	ctx, cancel := clock.WithTimeout(s.bg(), 5*time.Second)
	defer cancel()
	p.cancel()
	<-p.done
	closed := make(chan error, 1)
	go func() { closed <- p.mode.close(ctx) }()
	killAt := s.after(after)
	select {
	case err := <-closed:
		closed <- err
	case <-killAt.C:
	}
	killAt.Stop()
	p.dproc.Kill()
	p.zk.end(true)
	err := <-closed
	s.noteStore(p)
	s.allowance += held + simTop // what it held, and a load that was in flight
	n.proc = nil
	s.logf("%s: kill -9 %v into a clean stop (stop: %v)", p.name, after, err)
}

func (s *segSim) stop(n *simNode, strict bool) error {
	s.settle()
	p := n.proc
	if c := p.zk.latest(); c != nil {
		label, renewal := c.Label() // not the session ID: it counts every process's Connects
		s.logf("%s: before stop: store connected %v, latest conn state %v session %s#%d", p.name, p.mode.store.connected(), c.State(), label, renewal)
	}
	var ahead int64
	if st := p.mode.Status(); len(st) > 0 {
		ahead = max(st[0].Ahead, st[0].Chunk, simMaxTake) // as in kill
	}
	ctx, cancel := clock.WithTimeout(s.bg(), 5*time.Second)
	defer cancel()
	p.cancel()
	<-p.done
	closed := make(chan error, 1)
	go func() { closed <- p.mode.close(ctx) }()
	var err error
	for stopping := true; stopping; {
		meanwhile := s.after(100 * time.Millisecond)
		select {
		case err = <-closed:
			stopping = false
			meanwhile.Stop()
		case <-meanwhile.C:
			// The other nodes serve meanwhile: one may take a range this
			// stop returned while the stop still resolves a lost answer
			// (R5).
			var others []*simNode
			for _, o := range s.live() {
				if o != n {
					others = append(others, o)
				}
			}
			if !strict && len(others) > 0 {
				if terr := s.take(others[s.rng.IntN(len(others))]); terr != nil {
					<-closed
					return terr
				}
			}
		}
	}
	if err != nil {
		if w := p.watched(); w != nil {
			s.allowance += w.inflight.Load() // a load still in flight at the deadline
		}
		// A state-file write that failed (a full disk) leaves the file at
		// its last mark: the IDs below it are lost, never reissued.
		s.allowance += ahead
	}
	for _, ts := range p.mode.Status() {
		s.allowance += ts.Wasted
	}
	s.noteStore(p)
	p.zk.end(false)
	n.proc = nil
	s.logf("%s: clean stop: %v", p.name, err)
	if strict && err != nil {
		return s.fail("%s: a clean stop with ZooKeeper answering failed: %v", p.name, err)
	}
	return nil
}

func (s *segSim) take(n *simNode) error {
	s.settle()
	if s.world == worldReset {
		return s.takeReset(n)
	}
	p := n.proc
	k := 1 + s.rng.IntN(simMaxTake)
	ctx, cancel := clock.WithTimeout(s.bg(), 3*time.Second)
	defer cancel()
	var avail int64
	for _, ts := range p.mode.Status() {
		avail = ts.Available
	}
	diskOK := !p.dproc.Hung() && !p.dproc.Failing() && !p.dproc.LastFailed()
	ids, err := p.mode.Take(ctx, simTag, nil, k)
	if err != nil {
		// An opaque tag's resumed ranges wait for their key from ZooKeeper.
		if avail >= int64(k) && diskOK && s.perm == nil {
			// IDs held in memory are served whatever ZooKeeper does; only the
			// disk (the mark) may hold them up.
			return s.fail("%s: take %d failed with %d IDs in memory and a disk that answers: %v", p.name, k, avail, err)
		}
		s.logf("%s: take %d: %v", p.name, k, err)
		return nil
	}
	for i, id := range ids {
		if s.perm != nil {
			idx, err := s.perm.Index(id)
			if err != nil {
				return s.fail("%s: handed out %d: %v (the raw counter?)", p.name, id, err)
			}
			id = idx + 1 // the counter (start 1)
			ids[i] = id
		}
		if err := s.issued.record(&s.simTrace, "dense", p.name, &p.last, id); err != nil {
			return err
		}
		if by, ok := s.buried[id]; ok {
			return s.fail("dense ID %d issued twice: by %s of a deleted incarnation of the tag and by %s of the tag created again (R8)", id, by, p.name)
		}
	}
	s.logf("%s: took %d..%d", p.name, ids[0], ids[len(ids)-1])
	return nil
}

func (s *segSim) setFaults() {
	s.logf("%s", s.simZK.setFaults(s.rng))
	levels := []float64{0, 0, 0.02, 0.1}
	s.faultMu.Lock()
	s.movedP, s.lateP = levels[s.rng.IntN(4)], levels[s.rng.IntN(4)]
	s.faultMu.Unlock()
	s.logf("faults: sessions moved %.2f, late answers %.2f", s.movedP, s.lateP)
}

// setFaults draws new fault rates.
func (s *simZK) setFaults(rng *rand.Rand) string {
	levels := []float64{0, 0.05, 0.3, 0.5}
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	s.loseP, s.dropP, s.slowP = levels[rng.IntN(4)], levels[rng.IntN(4)]/2, levels[rng.IntN(4)]
	return fmt.Sprintf("faults: lose answers %.2f, drop %.2f, slow %.2f", s.loseP, s.dropP, s.slowP)
}

// stall holds every request for d.
func (s *simZK) stall(d time.Duration) {
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	s.stallTill = time.Now().Add(d)
}

// healZK ends every ZooKeeper fault.
func (s *simZK) healZK() {
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	s.loseP, s.dropP, s.slowP, s.movedP, s.lateP, s.stallTill = 0, 0, 0, 0, 0, time.Time{}
}

func (s *segSim) heal() {
	s.healZK()
	for _, n := range s.nodes {
		if n.proc != nil {
			n.proc.dproc.Hang(0)
			n.proc.dproc.Fail(nil)
		}
	}
	s.logf("faults healed")
}

func (s *segSim) live() []*simNode {
	var out []*simNode
	for _, n := range s.nodes {
		if n.proc != nil {
			out = append(out, n)
		}
	}
	return out
}

func (s *segSim) down() []*simNode {
	var out []*simNode
	for _, n := range s.nodes {
		if n.proc == nil {
			out = append(out, n)
		}
	}
	return out
}

// recreate deletes the tag and creates it again, healed first (every live
// node's session up, no dead node's state file listing a range): within
// 2s no live node may hold a range of the old tag. The books start again
// with the new tag.
func (s *segSim) recreate() error {
	for _, n := range s.down() {
		if rs, err := s.stateFile(n); err != nil || len(rs) > 0 {
			return err // a dead node holds ranges: not now
		}
	}
	s.heal()
	if s.wentBack {
		// ZooKeeper forgot allocations: its max_id is below numbers
		// issued, and a tombstone of it would be too (R8 rests on R6's
		// repair). The runbook repairs first.
		if err := s.repair(); err != nil {
			return err
		}
	}
	s.pause(30 * time.Second) // faults decided before the heal end, sessions come back
	synctest.Wait()
	st, err := segment.OpenZK(s.bg(), s.segConfig(s.srv.Dial))
	if err != nil {
		return s.fail("open an admin store: %v", err)
	}
	defer st.Close()
	if err := st.Delete(s.bg(), simTag); err != nil {
		return s.fail("segment delete: %v", err)
	}
	s.pause(2 * time.Second)
	synctest.Wait()
	for _, n := range s.live() {
		for _, ts := range n.proc.mode.Status() {
			if ts.Tag == simTag && len(ts.Held) > 0 {
				return s.fail("%s: 2s after the tag was deleted it still holds %v", n.proc.name, ts.Held)
			}
		}
	}
	tag := segment.Tag{Name: simTag, Start: 1, Step: simStep, MaxStep: simTop}
	if err := st.Create(s.bg(), tag); err != nil {
		return s.fail("segment create: %v", err)
	}
	if s.buried == nil {
		s.buried = simIssued{}
	}
	for id, by := range s.issued {
		s.buried[id] = by
	}
	s.issued, s.allowance, s.skipped, s.snap = simIssued{}, 0, nil, nil
	s.wentBack = false // the tag that went back is gone
	s.lostBase = 0
	for _, st := range s.stores {
		s.lostBase += st.PossiblyLost()
	}
	for _, n := range s.live() {
		n.proc.last = 0
	}
	s.logf("tag deleted and created again")
	return nil
}

// zkEvent, now and then: takes a snapshot of ZooKeeper, restores one taken
// a few steps ago (ZooKeeper forgets acknowledged writes), has the
// operator raise max_id back once a node refused the record that went
// back, or has the operator raise max_id (set-max).
func (s *segSim) zkEvent() error {
	if s.world != worldRecreate && s.zkEvents.IntN(500) == 0 {
		return s.rebuild()
	}
	if s.wentBack && (s.sawWentBack.Load() || len(s.live()) == 0) {
		return s.repair()
	}
	switch {
	case s.wentBack:
	case s.snap != nil && s.stepNo-s.snapStep >= 3 && s.zkEvents.IntN(100) == 0:
		return s.restore()
	case (s.snap == nil || s.stepNo-s.snapStep > 40) && s.zkEvents.IntN(10) == 0:
		s.snap, s.snapStep = s.srv.Snapshot(), s.stepNo
		s.logf("ZooKeeper snapshot taken")
	case s.zkEvents.IntN(100) == 0:
		return s.setMax()
	}
	return nil
}

// rebuild is ZooKeeper rebuilt after it lost its data, done as the
// runbook has it (docs/operations.md, A rebuilt ZooKeeper): every node
// stopped first (here kill -9: their state files keep their ranges), the
// cluster created again with a new incarnation and the tag with it, and
// the nodes started from their disks with --accept-new-incarnation. The
// new tag's ranges start from 1 again and its creation zxid is the old
// one's (a new ensemble's zxids start again), so only the cluster's
// incarnation tells a state file of the old ZooKeeper apart: it must be
// dropped (R4). The books start again.
func (s *segSim) rebuild() error {
	for _, n := range s.live() {
		if err := s.kill(n, false); err != nil {
			return err
		}
	}
	s.heal()
	s.srv.Rebuild()
	if err := s.setupZK(fmt.Sprintf("sim-incarnation-%d", s.stepNo)); err != nil {
		return s.fail("rebuild ZooKeeper: %v", err)
	}
	s.issued, s.allowance, s.skipped, s.snap, s.wentBack = simIssued{}, 0, nil, nil, false
	s.reset.forget()
	s.lostBase = 0
	for _, st := range s.stores {
		s.lostBase += st.PossiblyLost()
	}
	s.logf("ZooKeeper rebuilt: cluster incarnation %s", s.incarnation)
	return nil
}

// tagPath is the tag record's znode.
func (s *segSim) tagPath() string { return "/snowflaked/" + simCluster + "/segments/" + simTag }

// recordMaxID reads max_id from a tag record's data.
func (s *segSim) recordMaxID(data []byte) (int64, error) {
	var rec struct {
		MaxID int64 `json:"max_id"`
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		return 0, s.fail("tag record: %v", err)
	}
	return rec.MaxID, nil
}

// restore puts ZooKeeper back to the snapshot: it forgets what it
// acknowledged since, as Debian's ZooKeeper 3.8.0 was seen to. R6 covers
// what a store that saw the newer record can tell, so the world keeps to
// that: every live process has its store and reads the record first, so
// each saw the record's last version (allocations, returns and takes all
// write it): a take forgotten is caught by every live store, not only its
// taker, which another store could otherwise race to the range put back.
// No process starts until the operator raised max_id above the one
// forgotten (a new store could not tell). Returns forgotten lose their
// ranges.
func (s *segSim) restore() error {
	live := s.live()
	for _, n := range live {
		if n.proc.mode.store.p.Load() == nil {
			return nil // a store that never read the record: it could not tell
		}
	}
	s.heal()
	s.pause(30 * time.Second) // faults decided before the heal end, sessions come back
	synctest.Wait()
	_, before, _ := s.srv.Get(s.tagPath())
	for _, n := range live {
		ctx, cancel := clock.WithTimeout(s.bg(), 10*time.Second)
		_, err := n.proc.mode.store.p.Load().Tag(ctx, simTag)
		cancel()
		if err != nil {
			s.logf("no restore: %s cannot read the tag: %v", n.proc.name, err)
			return nil
		}
	}
	returned := s.tagPath() + "/returned"
	now := s.srv.Children(returned)
	cur, curVersion, ok1 := s.srv.Get(s.tagPath())
	if curVersion != before {
		s.logf("no restore: the record moved from version %d to %d while the stores read it", before, curVersion)
		return nil
	}
	old, oldVersion, ok2 := s.snap.Get(s.tagPath())
	if !ok1 || !ok2 {
		return s.fail("tag record missing (now %v, in the snapshot %v)", ok1, ok2)
	}
	forgotten, err := s.recordMaxID(cur)
	if err != nil {
		return err
	}
	restored, err := s.recordMaxID(old)
	if err != nil {
		return err
	}
	if s.world == worldReset && s.forgetsPeriod() {
		// The restore forgets a period's start: the operator's repair
		// must have it start again below its forgotten base (R9).
		s.logf("the restore forgets the start of a period")
	}
	for _, name := range now {
		if !slices.Contains(s.snap.Children(returned), name) {
			s.allowance += returnedLen(name) // its return is forgotten: lost
		}
	}
	s.srv.Restore(s.snap)
	s.logf("ZooKeeper restored to its snapshot of step %d: max_id %d at version %d, forgotten %d at version %d",
		s.snapStep, restored, oldVersion, forgotten, curVersion)
	s.snap = nil
	if oldVersion < curVersion {
		s.wentBack, s.forgotten = true, forgotten
		s.sawWentBack.Store(false)
	}
	return nil
}

// returnedLen is the length of the range a returned range's znode names
// (<lo>-<hi>@<inc>).
func returnedLen(name string) int64 {
	r, _, _ := strings.Cut(name, "@")
	lo, hi, _ := strings.Cut(r, "-")
	l, _ := strconv.ParseInt(lo, 10, 64)
	h, _ := strconv.ParseInt(hi, 10, 64)
	return h - l
}

// operator opens a store for an operator's command: a session of its own
// whose requests are delayed with everyone's but never lost, and a timeout
// past every delay, so the command's outcome is known.
func (s *segSim) operator() (*segment.ZKStore, error) {
	dial := func(_ []string, opt zkconn.Options) (zkconn.Conn, error) {
		c := s.srv.Connect(opt)
		s.faultMu.Lock()
		if s.calm == nil {
			s.calm = map[int64]bool{}
		}
		s.calm[c.SessionID()] = true
		s.faultMu.Unlock()
		return c, nil
	}
	cfg := s.segConfig(dial)
	cfg.Timeout = 30 * time.Second
	st, err := segment.OpenZK(s.bg(), cfg)
	if err != nil {
		return nil, s.fail("open an operator's store: %v", err)
	}
	return st, nil
}

// repair is the operator's answer to a record that went back (R6: a node
// refused it): delete the tag's returned ranges (a take ZooKeeper forgot
// put back a range its taker holds; they are lost), then raise max_id above
// the one forgotten, above every ID handed out and every max_id a node saw.
func (s *segSim) repair() error {
	st, err := s.operator()
	if err != nil {
		return err
	}
	defer st.Close()
	// The runbook's repair: segment set-max --drop-returned, one
	// version-checked multi.
	n := s.forgotten + 1
	was, dropped, err := st.Repair(s.bg(), simTag, n)
	if err != nil {
		return s.fail("set-max %d --drop-returned after ZooKeeper went back: %v", n, err)
	}
	for _, r := range dropped {
		s.allowance += r.Len() // lost, unless its forgotten taker holds it
	}
	s.skipped = append(s.skipped, segment.Range{Lo: max(was, s.forgotten), Hi: n})
	s.wentBack = false
	s.sawWentBack.Store(false)
	s.logf("operator: %d returned ranges dropped, max_id raised back from %d to %d", len(dropped), was, n)
	return nil
}

// setMax is an operator's set-max, under the faults: max_id rises by up
// to a step; the IDs skipped are never allocated, so not lost.
func (s *segSim) setMax() error {
	st, err := s.operator()
	if err != nil {
		return err
	}
	defer st.Close()
	ctx := s.bg()
	t, err := st.Tag(ctx, simTag)
	if err != nil {
		return s.fail("operator: read the tag: %v", err)
	}
	n := t.MaxID + 1 + s.zkEvents.Int64N(simStep)
	was, err := st.SetMax(ctx, simTag, n)
	switch {
	case errors.Is(err, segment.ErrMaxIDBelow):
		s.logf("operator: set-max %d: %v", n, err)
	case err != nil:
		return s.fail("operator: set-max %d: %v", n, err)
	case n > was:
		s.skipped = append(s.skipped, segment.Range{Lo: was, Hi: n})
		s.logf("operator: set-max %d (was %d)", n, was)
	}
	return nil
}

// step runs one random action.
func (s *segSim) step() error {
	if s.world == worldRecreate && s.recreates.IntN(60) == 0 {
		return s.recreate()
	}
	if s.world == worldReset && s.reset.nights.IntN(15) == 0 {
		return s.night()
	}
	if err := s.zkEvent(); err != nil {
		return err
	}
	live, down := s.live(), s.down()
	pick := func(ns []*simNode) *simNode { return ns[s.rng.IntN(len(ns))] }
	r := s.rng.IntN(100)
	switch {
	case r < 55 && len(live) > 0:
		return s.take(pick(live))
	case r < 65:
		d := time.Duration(1+s.rng.IntN(300)) * time.Millisecond
		s.pause(d)
	case r < 70 && len(live) > 0:
		return s.kill(pick(live), s.rng.IntN(8) == 0)
	case r < 73 && len(live) > 0:
		return s.stop(pick(live), false)
	case r < 75 && len(live) > 0:
		s.killDuringStop(pick(live), time.Duration(s.rng.IntN(2000))*time.Millisecond)
	case r < 85 && len(down) > 0:
		n := pick(down)
		if s.wentBack {
			// A new store never saw the max_id ZooKeeper forgot: it could
			// not tell (R6). The operator raises max_id first.
			s.logf("%s: not started: ZooKeeper went back, max_id not raised yet", n.name)
			break
		}
		s.start(n)
	case r < 90:
		s.setFaults()
	case r < 92:
		d := time.Duration(500+s.rng.IntN(7000)) * time.Millisecond
		s.stall(d)
		s.logf("ZooKeeper stalls for %v", d)
	case r < 95 && len(live) > 0:
		p := pick(live).proc
		if c := p.zk.latest(); c != nil {
			s.srv.Expire(c.SessionID())
			s.logf("%s: session expired", p.name)
		}
	case r < 98 && len(live) > 0:
		p := pick(live).proc
		s.logf("%s: %s", p.name, s.diskFault(s.rng, p.dproc, 4*time.Second))
	default:
		s.pause(time.Duration(1+s.rng.IntN(3000)) * time.Millisecond)
	}
	return nil
}

// diskFault makes a process's disk full for up to most (one time in
// three), or its writes take up to most; it says which.
func (s *simZK) diskFault(rng *rand.Rand, d *disk.Proc, most time.Duration) string {
	if rng.IntN(3) == 0 {
		full := time.Duration(1+rng.Int64N(int64(most/time.Millisecond))) * time.Millisecond
		d.Fail(syscall.ENOSPC)
		clock.AfterFunc(s.bg(), full, func() { d.Fail(nil) })
		return fmt.Sprintf("disk full for %v", full)
	}
	hang := time.Duration(rng.Int64N(int64(most/time.Millisecond))) * time.Millisecond
	d.Hang(hang)
	return fmt.Sprintf("disk writes take %v", hang)
}

// finish heals everything, starts every node (so state files resume),
// stops each cleanly and checks the books.
func (s *segSim) finish() error {
	s.heal()
	if s.wentBack {
		if err := s.repair(); err != nil {
			return err
		}
	}
	for _, n := range s.down() {
		s.start(n)
	}
	// Faults decided before the heal (a held request that then loses its
	// answer, with the connection down for up to 6s) end within 30s; then
	// sessions come back and resumed ranges load.
	s.pause(30 * time.Second)
	for _, n := range s.nodes {
		served := s.reset.served
		for range 3 {
			if err := s.take(n); err != nil {
				return err
			}
		}
		if s.world == worldReset && s.reset.served == served {
			// Healed, a reset tag's node serves: its ranges confirmed, its
			// period started (AllocPeriod through the node's store).
			return s.fail("%s: served no number of the reset tag in three takes, healed", n.proc.name)
		}
	}
	for _, n := range s.nodes {
		if err := s.stop(n, true); err != nil {
			return err
		}
	}
	for _, n := range s.nodes {
		rs, err := s.stateFile(n)
		if err != nil {
			return err
		}
		if len(rs) > 0 {
			return s.fail("%s: after a clean stop its state file still lists %v", n.name, rs)
		}
	}
	return s.checkBooks()
}

// checkBooks: the returned ranges hold no issued ID and overlap none
// other; allocated = issued + returned + lost, lost within the allowance.
func (s *segSim) checkBooks() error {
	tagPath := "/snowflaked/" + simCluster + "/segments/" + simTag
	data, _, ok := s.srv.Get(tagPath)
	if !ok {
		return s.fail("tag record gone")
	}
	var rec struct {
		MaxID int64 `json:"max_id"`
		Start int64 `json:"start"`
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		return s.fail("tag record: %v", err)
	}
	var returned []segment.Range
	for _, name := range s.srv.Children(tagPath + "/returned") {
		name, _, _ = strings.Cut(name, "@") // the tag's incarnation: it has one
		lo, hi, ok := strings.Cut(name, "-")
		l, err1 := strconv.ParseInt(lo, 10, 64)
		h, err2 := strconv.ParseInt(hi, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return s.fail("returned range %q: bad name", name)
		}
		returned = append(returned, segment.Range{Lo: l, Hi: h})
	}
	slices.SortFunc(returned, func(a, b segment.Range) int { return int(a.Lo - b.Lo) })
	var back int64
	for i, r := range returned {
		if i > 0 && r.Lo < returned[i-1].Hi {
			return s.fail("returned ranges %v and %v overlap: their IDs would be handed out twice", returned[i-1], r)
		}
		for id := r.Lo; id < r.Hi; id++ {
			if by, ok := s.issued[id]; ok {
				return s.fail("returned range %v holds ID %d, issued by %s", r, id, by)
			}
		}
		if r.Lo < rec.Start || r.Hi > rec.MaxID {
			return s.fail("returned range %v lies outside [start %d, max_id %d)", r, rec.Start, rec.MaxID)
		}
		back += r.Len()
	}
	var skipped int64
	for _, r := range s.skipped {
		for id := r.Lo; id < r.Hi; id++ {
			if by, ok := s.issued[id]; ok {
				return s.fail("ID %d issued by %s lies in %v, which set-max skipped", id, by, r)
			}
		}
		skipped += r.Len()
	}
	var unknown int64
	for _, st := range s.stores {
		unknown += st.PossiblyLost()
	}
	{
		unknown -= s.lostBase
	}
	allocated := rec.MaxID - rec.Start - skipped
	lost := allocated - int64(len(s.issued)) - back
	s.logf("books: allocated %d (set-max skipped %d), issued %d, returned %d, lost %d (allowed %d + possibly lost %d)", allocated, skipped, len(s.issued), back, lost, s.allowance, unknown)
	if lost < 0 {
		return s.fail("more IDs issued and returned (%d) than allocated (%d)", allocated-lost, allocated)
	}
	if lost > s.allowance+unknown {
		return s.fail("%d IDs lost, more than the %d the crashes and stops may lose plus %d possibly lost; lost: %v",
			lost, s.allowance, unknown, s.lostRanges(rec.Start, rec.MaxID, append(returned, s.skipped...)))
	}
	return nil
}

// lostRanges lists the IDs of [lo, hi) neither issued nor in returned
// (the returned ranges, and those set-max skipped).
func (s *segSim) lostRanges(lo, hi int64, returned []segment.Range) []segment.Range {
	var out []segment.Range
	for id := lo; id < hi; id++ {
		if _, ok := s.issued[id]; ok || countNotIn([]segment.Range{{Lo: id, Hi: id + 1}}, returned) == 0 {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Hi == id {
			out[n-1].Hi++
		} else {
			out = append(out, segment.Range{Lo: id, Hi: id + 1})
		}
	}
	return out
}

// runSegmentSim runs one seed in a synctest bubble and returns the first
// broken invariant.
func runSegmentSim(t *testing.T, seed uint64, steps int, world segWorld) error {
	t.Helper()
	_, err := runSegmentSimTrace(t, seed, steps, world)
	return err
}

// runSegmentSimTrace is runSegmentSim that also returns the run's trace.
func runSegmentSimTrace(t *testing.T, seed uint64, steps int, world segWorld) (trace []string, err error) {
	t.Helper()
	defer simRuntime()()
	synctest.Test(t, func(*testing.T) {
		var s *segSim
		s, err = newSegSim(seed, world)
		if err != nil {
			return
		}
		s.start(s.nodes[0])
		s.start(s.nodes[1])
		synctest.Wait() // the starts settle before the first step, as every step does
		for s.stepNo = 1; s.stepNo <= steps && err == nil; s.stepNo++ {
			err = s.step()
			synctest.Wait() // what the step set off settles before the next one: replays stay close
		}
		if err == nil {
			err = s.finish()
		}
		if synctestDebug {
			fmt.Println(strings.Join(s.trace, "\n"))
		}
		s.heal()
		for _, n := range s.live() {
			_ = s.kill(n, false)
		}
		trace = s.trace
	})
	return trace, err
}

// watchedStore counts the IDs a process's store calls may have moved
// without the process learning it: a range per Alloc in flight, the range
// of a Return in flight.
type watchedStore struct {
	segment.Store
	inflight atomic.Int64
	wentBack *atomic.Bool // set when the store refuses a record that went back (R6)
}

func (w *watchedStore) Alloc(ctx context.Context, tag string, inc, step, above int64) (segment.Range, segment.Tag, error) {
	w.inflight.Add(simTop)
	defer w.inflight.Add(-simTop)
	r, t, err := w.Store.Alloc(ctx, tag, inc, step, above)
	w.noteWentBack(err)
	return r, t, err
}

// AllocPeriod passes a reset tag's period start through, counted as
// Alloc is.
func (w *watchedStore) AllocPeriod(ctx context.Context, tag string, inc, step int64, period string) (segment.Range, segment.Tag, error) {
	w.inflight.Add(simTop)
	defer w.inflight.Add(-simTop)
	ps, ok := w.Store.(segment.PeriodStore)
	if !ok {
		return segment.Range{}, segment.Tag{}, errors.New("the node's store cannot start periods")
	}
	r, t, err := ps.AllocPeriod(ctx, tag, inc, step, period)
	w.noteWentBack(err)
	return r, t, err
}

func (w *watchedStore) Return(ctx context.Context, tag string, inc int64, r segment.Range) error {
	w.inflight.Add(r.Len())
	defer w.inflight.Add(-r.Len())
	err := w.Store.Return(ctx, tag, inc, r)
	w.noteWentBack(err)
	return err
}

func (w *watchedStore) noteWentBack(err error) {
	if errors.Is(err, segment.ErrWentBack) && w.wentBack != nil {
		w.wentBack.Store(true)
	}
}

// WatchTag passes the node's watch on a tag's deletion through, so the
// simulation runs it under the faults too.
func (w *watchedStore) WatchTag(ctx context.Context, tag string, inc int64) (<-chan bool, error) {
	tw, ok := w.Store.(segment.TagWatcher)
	if !ok {
		return nil, errors.New("this store has no watches")
	}
	return tw.WatchTag(ctx, tag, inc)
}

// Key passes an opaque tag's key through.
func (w *watchedStore) Key(ctx context.Context, tag string, inc int64) ([]byte, error) {
	ks, ok := w.Store.(segment.KeyStore)
	if !ok {
		return nil, errors.New("this store holds no keys")
	}
	return ks.Key(ctx, tag, inc)
}

// watched is the process's watchedStore (nil before its service started).
func (p *simProc) watched() *watchedStore { return p.ws.Load() }

// simResetRule is worldReset's tag's: a daily reset in UTC, printed as
// 20001231000123.
var simResetRule = segment.Reset{Every: segment.EveryDay, Zone: "UTC", Format: "{date}{seq:6}"}

// simResetText is what simResetRule prints: the period's date, then the
// number in six digits.
var simResetText = regexp.MustCompile(`^([0-9]{8})([0-9]{6})$`)

// simReset is worldReset's books of the numbers, beside the counter's
// (segSim.issued, which holds the counter values behind them).
type simReset struct {
	rule *segment.ResetRule
	// nights draws the nights (segSim.night) and how far before midnight
	// each ends, apart from rng so the other draws stay the same.
	nights *rand.Rand
	// numbers are each period's numbers handed out, by the process that
	// did; bases each period's base as the tag's record first showed it.
	numbers map[string]map[int64]string
	bases   map[string]int64
	// restarted are the periods a repaired record started again at a
	// lower base.
	restarted map[string]bool
	served    int // takes answered
}

func (r *simReset) init(seed uint64) error {
	rule, err := simResetRule.Compile()
	if err != nil {
		return err
	}
	r.rule, r.nights = rule, rand.New(rand.NewPCG(seed, 0x4d1))
	r.forget()
	return nil
}

// forget starts the books again (a tag of a new incarnation).
func (r *simReset) forget() {
	r.numbers, r.bases, r.restarted = map[string]map[int64]string{}, map[string]int64{}, map[string]bool{}
}

// toMidnight sleeps until 5s to 1m before the next midnight (UTC),
// unless it is nearer already.
func (s *segSim) toMidnight() {
	now := time.Now().UTC()
	next := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
	ahead := 5*time.Second + time.Duration(s.reset.nights.Int64N(int64(55*time.Second)))
	if d := next.Sub(now) - ahead; d > 0 {
		s.pause(d)
	}
}

// night (worldReset) ends every live node (kill -9 or a clean stop, as
// drawn), sleeps until a little before the next midnight and starts them
// again, so the run crosses several midnights with nodes serving through
// each, without simulating the hours between (a live node's timers would
// fire all through them). The nodes resume their state files, ranges and
// period of the day before.
func (s *segSim) night() error {
	if now := time.Now().UTC(); now.Hour() == 23 && now.Minute() >= 55 {
		return nil // midnight is near: the night is over
	}
	live := s.live()
	for _, n := range live {
		var err error
		if s.reset.nights.IntN(2) == 0 {
			err = s.kill(n, false)
		} else {
			err = s.stop(n, false)
		}
		if err != nil {
			return err
		}
	}
	s.toMidnight()
	s.logf("night: the clock says %s", time.Now().UTC().Format(time.RFC3339))
	for _, n := range live {
		if s.wentBack {
			s.logf("%s: not started: ZooKeeper went back, max_id not raised yet", n.name)
			continue
		}
		s.start(n)
	}
	return nil
}

// simTakePeriod takes k numbers of the sim's tag from a process's segment
// mode as the server does, with their period: segmentMode.TakePeriod where
// the node has it, else segmentMode.TakeWithToken's path (the store opened
// on first use) ending in segment.Service.TakePeriod.
func simTakePeriod(ctx context.Context, m *segmentMode, k int) ([]int64, segment.Period, error) {
	type periodTaker interface {
		TakePeriod(ctx context.Context, tag string, token []byte, dst []int64, n int) ([]int64, segment.Period, error)
	}
	if tp, ok := any(m).(periodTaker); ok {
		return tp.TakePeriod(ctx, simTag, nil, nil, k)
	}
	svc := m.svc.Load()
	if m.store.p.Load() == nil && (svc == nil || !svc.Serves(simTag)) {
		if err := m.awaitOpen(ctx); err != nil {
			return nil, segment.Period{}, err
		}
		svc = m.svc.Load()
	}
	if svc == nil {
		return nil, segment.Period{}, errSegmentsStarting
	}
	return svc.TakePeriod(ctx, simTag, nil, nil, k)
}

// takeReset is take for worldReset: k numbers of one period through
// TakePeriod. Each must print as the format says with its period's date,
// be at least the tag's start and appear once in its period (R9); the
// period must be one the node's clock said during the take and never
// before one its disk answered in; the period's base, as the tag's record
// shows it, never changes; and the counter values behind the numbers
// (number - start + base) go to the plain run's books.
func (s *segSim) takeReset(n *simNode) error {
	p := n.proc
	k := 1 + s.rng.IntN(simMaxTake)
	ctx, cancel := clock.WithTimeout(s.bg(), 3*time.Second)
	defer cancel()
	from := s.reset.rule.PeriodOf(time.Now().Add(n.skew))
	nums, per, err := simTakePeriod(ctx, p.mode, k)
	to := s.reset.rule.PeriodOf(time.Now().Add(n.skew))
	if err != nil {
		// A reset tag serves only ranges ZooKeeper confirmed, and a new
		// period only once its base is known: a failure is no proof here.
		s.logf("%s: take %d: %v", p.name, k, err)
		return nil
	}
	if per.IsZero() {
		return s.fail("%s: handed out %v of a reset tag with no period (the raw counter?)", p.name, nums)
	}
	key := per.Key
	if key < from || key > to {
		return s.fail("%s: answered in period %s while its clock (%v off) said %s to %s", p.name, key, n.skew, from, to)
	}
	if key < n.period {
		return s.fail("%s: answered in period %s after %s on this disk: a node's periods never go back", p.name, key, n.period)
	}
	n.period = key
	data, _, ok := s.srv.Get(s.tagPath())
	if !ok {
		return s.fail("%s: took %v in period %s: the tag record is gone", p.name, nums, key)
	}
	var rec struct {
		Start          int64            `json:"start"`
		Periods        map[string]int64 `json:"periods"`
		RestartBase    int64            `json:"restart_base"`
		RestartThrough string           `json:"restart_through"`
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		return s.fail("tag record: %v", err)
	}
	if err := s.checkResetNumbers(p.name, per, nums, rec.Start); err != nil {
		return err
	}
	base, known := s.reset.bases[key]
	if b, ok := rec.Periods[key]; ok {
		if known && b != base {
			if key > rec.RestartThrough || b != rec.RestartBase || b > base {
				return s.fail("period %s started twice: its base was %d, the tag's record now says %d (R9)", key, base, b)
			}
			// The repair of a record that forgot the period's start: it
			// starts again at the restart base, below the forgotten one.
			// Its numbers are still checked above; its counter values,
			// numbered from two bases, are not.
			s.logf("period %s started again at base %d (it was %d): the record was repaired", key, b, base)
			s.reset.restarted[key] = true
		}
		base, known = b, true
		s.reset.bases[key] = b
		if key <= rec.RestartThrough && b == rec.RestartBase {
			// Started after a repair, perhaps again: a node may still
			// serve what it held under the forgotten base.
			s.reset.restarted[key] = true
		}
	}
	if !known {
		// A restore forgot the period's start before this checker read
		// the record; the node serves what it holds under the base it
		// read then. Its numbers are checked above, its counter values
		// not.
		s.logf("%s: took %v in period %s, whose start the record forgot", p.name, nums, key)
		s.reset.restarted[key] = true
	}
	if s.reset.restarted[key] {
		// Counter values not tracked: the books may count them lost.
		s.allowance += int64(len(nums))
	}
	for _, num := range nums {
		if s.reset.restarted[key] {
			break
		}
		if err := s.issued.record(&s.simTrace, "counter value", p.name, &p.last, num-rec.Start+base); err != nil {
			return err
		}
	}
	s.reset.served++
	s.logf("%s: took %d..%d of period %s (base %d)", p.name, nums[0], nums[len(nums)-1], key, base)
	return nil
}

// checkResetNumbers checks the numbers nums that node name took in period
// per: each printed with the period's date, at or above the tag's start,
// and never handed out before in that period (R9); it records them.
func (s *segSim) checkResetNumbers(name string, per segment.Period, nums []int64, start int64) error {
	key := per.Key
	seen := s.reset.numbers[key]
	if seen == nil {
		seen = map[int64]string{}
		s.reset.numbers[key] = seen
	}
	date := strings.ReplaceAll(key, "-", "")
	for _, num := range nums {
		text := string(per.AppendID(nil, num))
		if m := simResetText.FindStringSubmatch(text); m == nil || m[1] != date || per.Date() != date || m[2] != fmt.Sprintf("%06d", num) {
			return s.fail("%s: number %d of period %s prints as %q (date %q), not as %s", name, num, key, text, per.Date(), simResetRule.Format)
		}
		if num < start {
			return s.fail("%s: number %d of period %s is below the tag's start %d", name, num, key, start)
		}
		if by, dup := seen[num]; dup {
			return s.fail("number %d of period %s (%s) handed out twice: by %s and by %s (R9)", num, key, text, by, name)
		}
		seen[num] = name
	}
	return nil
}

// forgetsPeriod reports whether restoring ZooKeeper to the world's
// snapshot would drop a period the tag's record has started.
func (s *segSim) forgetsPeriod() bool {
	cur, _, ok1 := s.srv.Get(s.tagPath())
	old, _, ok2 := s.snap.Get(s.tagPath())
	if !ok1 || !ok2 {
		return false
	}
	var a, b struct {
		Periods map[string]int64 `json:"periods"`
	}
	if json.Unmarshal(cur, &a) != nil || json.Unmarshal(old, &b) != nil {
		return false
	}
	for k := range a.Periods {
		if _, ok := b.Periods[k]; !ok {
			return true
		}
	}
	return false
}
