package node

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/internal/zkconn"
	"codeberg.org/snowflaked/snowflaked/internal/zkconn/zkmem"
)

// The rule scenarios drive the shipped node (node.Run, as the snowflake
// simulation does) through the one fault each of three rules of
// docs/fencing.md is there for, which the random schedules of the other
// simulations did not reach in the seeds make test runs:
//
//   - S1: a holder's renewal is sent just as its connection breaks; its
//     session expires, the node key's new machine claims the worker ID,
//     and the renewal goes out when the old process reconnects, after the
//     claim. Its version check must fail it: the old process is fenced out.
//   - S2 (graceful stop): a clean stop whose cache-file write fails; the
//     node key moves to a new machine, and the old machine boots again cut
//     off from ZooKeeper, resuming from its cache file. ZooKeeper's fence
//     may come down only after the cache file's copy did.
//   - L1: a fence write hangs on the disk, the clock steps forward within
//     --fence-ahead, a batch is asked, kill -9, and the node reboots on its
//     disk with its clock set back. The generator may use only a persisted
//     fence.
//
//   - tombstone: the cluster is deleted (refused while its node serves)
//     after its node stopped, was killed or was cut off from ZooKeeper, and
//     created again; a new machine whose clock is up to 20s behind joins it
//     and takes worker ID 0 again. It must start after the deleted
//     cluster's fence, and the node cut off must not serve again.
//
// The checks are the snowflake simulation's: no ID twice, and the processes
// that held one worker ID issued in disjoint tick ranges. Each seed runs one
// scenario (seed 1: S1, 2: S2, 3: L1, 4: tombstone, 5: S1 again, ...) with batch sizes and
// pauses drawn from the seed. The mutation table (docs/testing.md) breaks
// each rule and names the seed and step that catch it.

// rulesSeeds is how many seeds make test runs: each scenario twice.
const rulesSeeds = 8

// snowRules is the scenarios' world: the snowflake simulation's layout and
// fences, every process leaving service on a rollback, no random faults.
var snowRules = snowWorld{seqBits: 20, maxBatch: 50, fenceAhead: time.Second}

// rulesScenarios are the scenarios, by (seed-1) % len.
var rulesScenarios = []struct {
	name string
	run  func(s *snowSim) error
}{
	{"S1: a renewal sent before a take-over lands after it", (*snowSim).lateRenewal},
	{"S2: a clean stop whose cache-file write fails", (*snowSim).stopDiskFails},
	{"L1: a fence write hangs while the clock steps forward", (*snowSim).fenceWriteHangs},
	{"tombstone: the cluster deleted and created again", (*snowSim).clusterRecreated},
}

// TestSimulation_SnowflakeRules runs the rule scenarios (SIM_SEED=N runs
// one, SIM_SEEDS=N the first N).
func TestSimulation_SnowflakeRules(t *testing.T) {
	seeds := simSeeds(t)
	if os.Getenv("SIM_SEED") == "" && os.Getenv("SIM_SEEDS") == "" {
		seeds = seeds[:min(len(seeds), rulesSeeds)]
	}
	for _, seed := range seeds {
		if _, err := runRulesSim(t, seed); err != nil {
			t.Fatalf("seed %d (replay: SIM_SEED=%d go test -run 'TestSimulation_SnowflakeRules$' ./node/): %v", seed, seed, err)
		}
	}
}

// runRulesSim runs seed's scenario and returns its trace.
func runRulesSim(t *testing.T, seed uint64) (trace []string, err error) {
	t.Helper()
	defer simRuntime()()
	dir := t.TempDir()
	sc := rulesScenarios[(seed-1)%uint64(len(rulesScenarios))]
	synctest.Test(t, func(*testing.T) {
		s := &snowSim{simZK: newSimZK(seed), world: snowRules, rng: rand.New(rand.NewPCG(seed, 0x51e5)), dir: dir,
			issued: simIssued{}, ticks: map[int64]map[string]*tickSpan{}, simTrace: simTrace{dir: dir}}
		s.logf("scenario %s", sc.name)
		err = sc.run(s)
		for _, n := range s.nodes {
			if n.proc != nil {
				s.kill(n, false)
			}
		}
		if synctestDebug {
			fmt.Println(strings.Join(s.trace, "\n"))
		}
		trace = s.trace
		time.Sleep(time.Minute) // the HTTP servers' idle-worker cleaners notice their stop
	})
	return trace, err
}

// stage starts the scenario's next step (the step a failure names).
func (s *snowSim) stage(format string, a ...any) {
	s.stepNo++
	s.logf(format, a...)
}

// addNode adds a machine with an empty disk, running key ("" for a new
// key), its clock off by off.
func (s *snowSim) addNode(key string, off time.Duration) *snowNode {
	if key == "" {
		s.keys++
		key = fmt.Sprintf("k%d", s.keys)
	}
	// Its processes count from 100*slot: one node key's processes on two
	// machines have distinct names.
	n := &snowNode{slot: s.slots, key: key, disk: s.newDisk(), clock: &simClock{origin: time.Now()}, procs: 100 * s.slots}
	s.slots++
	n.clock.set(int64(off))
	s.nodes = append(s.nodes, n)
	return n
}

// ready waits up to limit for n's process to be in service.
func (s *snowSim) ready(n *snowNode, limit time.Duration) bool {
	for end := time.Now().Add(limit); time.Now().Before(end); s.pause(10 * time.Millisecond) {
		if nd := n.proc.n.Load(); nd != nil && nd.srv != nil && nd.guard.Ready() {
			return true
		}
	}
	s.logf("%s: not in service after %v", n.proc.name, limit)
	return false
}

// issueFor sends batches to each of ns in turn, 100–300ms apart, for d.
func (s *snowSim) issueFor(d time.Duration, ns ...*snowNode) error {
	for end := time.Now().Add(d); time.Now().Before(end); {
		for _, n := range ns {
			if err := s.issue(n); err != nil {
				return err
			}
		}
		s.pause(time.Duration(100+s.rng.IntN(200)) * time.Millisecond)
	}
	return nil
}

// rulesCutProbe is the path of the request that breaks a connection for
// rulesCutFor (cutBeforeRenewal): longer than the session timeout.
const (
	rulesCutProbe = "/rules-cut"
	rulesCutFor   = 8 * time.Second
)

// cutBeforeRenewal is a ZooKeeper client whose connection breaks just as
// the next write to a forever znode is sent, once armed: the write is
// queued, as go-zookeeper queues a request made while disconnected, and
// goes out after the reconnect, on the new session, whether or not its
// caller still waits for it.
type cutBeforeRenewal struct {
	zkconn.Conn
	armed *atomic.Bool
}

func (c cutBeforeRenewal) Set(p string, data []byte, version int32) (*zk.Stat, error) {
	if strings.Contains(p, "/forever/") && c.armed.CompareAndSwap(true, false) {
		_, _, _ = c.Conn.Exists(rulesCutProbe) // dropped: the connection goes down
	}
	return c.Conn.Set(p, data, version)
}

// lateRenewal is the S1 scenario. A's clock is 8s behind, so the IDs it
// would issue after a renewal that wrongly succeeded fall among the new
// machine's.
func (s *snowSim) lateRenewal() error {
	armed := map[string]*atomic.Bool{}
	s.wrapDial = func(p *snowProc, d zkconn.Dialer) zkconn.Dialer {
		a := &atomic.Bool{}
		armed[p.name] = a
		return func(servers []string, opt zkconn.Options) (zkconn.Conn, error) {
			c, err := d(servers, opt)
			if err != nil {
				return nil, err
			}
			return cutBeforeRenewal{Conn: c, armed: a}, nil
		}
	}
	s.srv.SetInjector(func(r zkmem.Request) zkmem.Fault {
		if r.Path == rulesCutProbe {
			return zkmem.Fault{Kind: zkmem.Drop, Down: rulesCutFor}
		}
		return s.inject(r)
	})
	a, err := s.startServing(-8*time.Second, ", its clock 8s behind", time.Second, 0)
	if err != nil {
		return err
	}
	old := a.proc
	s.stage("%s: its connection breaks as its next renewal is sent", old.name)
	armed[old.name].Store(true)
	for end := time.Now().Add(3 * time.Second); armed[old.name].Load() && time.Now().Before(end); {
		s.pause(10 * time.Millisecond)
	}
	if armed[old.name].Load() {
		return s.fail("%s sent no renewal", old.name)
	}
	cut := time.Now()
	// The node key moves to a new machine; the old process stays.
	b := s.addNode(a.key, 0)
	s.stage("%s: its node key starts on a new machine", b.key)
	s.start(b)
	if !s.ready(b, 20*time.Second) {
		return s.fail("%s never served", b.proc.name)
	}
	if err := s.issueFor(500*time.Millisecond, b); err != nil {
		return err
	}
	s.stage("%s: stops, before the old process reconnects", b.proc.name)
	s.stop(b)
	// The old process reconnects at cut+rulesCutFor, and its renewal goes
	// out then, after the new machine's claim and final fence.
	s.pause(time.Until(cut.Add(rulesCutFor)))
	s.stage("%s: reconnects; batches until its clock passes the new machine's IDs", old.name)
	s.ready(a, 10*time.Second)
	return s.issueFor(10*time.Second, a)
}

// startServing is how each scenario begins: a new node key, its clock off
// by off (how says so in the trace), started, and batches to it for base
// plus up to spread (drawn once it serves) once it serves.
func (s *snowSim) startServing(off time.Duration, how string, base, spread time.Duration) (*snowNode, error) {
	a := s.addNode("", off)
	s.stage("%s: starts%s", a.key, how)
	s.start(a)
	if !s.ready(a, 20*time.Second) {
		return nil, s.fail("%s never served", a.proc.name)
	}
	d := base
	if spread > 0 {
		d += time.Duration(s.rng.IntN(int(spread/time.Millisecond))) * time.Millisecond
	}
	return a, s.issueFor(d, a)
}

// stopDiskFails is the S2 scenario (graceful stop).
func (s *snowSim) stopDiskFails() error {
	a, err := s.startServing(0, "", 1500*time.Millisecond, time.Second)
	if err != nil {
		return err
	}
	s.stage("%s: its disk fails every write; a clean stop", a.proc.name)
	a.proc.dproc.Fail(errors.New("no space left on device"))
	s.stop(a)
	b := s.addNode(a.key, 0)
	s.stage("%s: its node key starts on a new machine", b.key)
	s.start(b)
	s.stage("%s: the old machine boots again on its disk, cut off from ZooKeeper, its clock 3s behind", a.key)
	a.clock.set(int64(-3 * time.Second))
	s.start(a)
	s.cutOff(&a.proc.zk, time.Now().Add(30*time.Second))
	s.stage("batches to both")
	return s.issueFor(12*time.Second, a, b)
}

// fenceWriteHangs is the L1 scenario.
func (s *snowSim) fenceWriteHangs() error {
	a, err := s.startServing(0, "", 500*time.Millisecond, time.Second)
	if err != nil {
		return err
	}
	s.stage("%s: its disk writes hang", a.proc.name)
	a.proc.dproc.Hang(time.Minute)
	for end := time.Now().Add(time.Second); !a.proc.dproc.Writing() && time.Now().Before(end); {
		s.pause(time.Millisecond)
	}
	if !a.proc.dproc.Writing() {
		return s.fail("%s wrote no fence", a.proc.name)
	}
	step := time.Duration(850+s.rng.IntN(100)) * time.Millisecond
	s.stage("%s: a fence write hangs; its clock steps %v forward; a batch", a.proc.name, step)
	a.clock.off.Add(int64(step))
	if err := s.issue(a); err != nil {
		return err
	}
	s.kill(a, false)
	s.stage("%s: reboots with its clock set right", a.key)
	a.clock.set(0)
	s.start(a)
	s.ready(a, 10*time.Second)
	return s.issueFor(time.Second, a)
}

// clusterRecreated is the tombstone scenario: A serves; the operator's
// delete is refused while it does; A stops cleanly, is killed or is cut
// off from ZooKeeper (by seed); the operator deletes the cluster (trying
// again while A's fence is ahead) and creates it again, or B's start does
// (--create-cluster); B, a new machine whose clock is 5 to 20s behind,
// joins and serves beside what is left of A.
func (s *snowSim) clusterRecreated() error {
	a, err := s.startServing(0, "", time.Second, time.Second)
	if err != nil {
		return err
	}
	deleteCluster := func(a *coordinator.Admin) error { return a.DeleteCluster(s.bg(), snowCluster) }
	s.stage("the operator deletes the cluster while %s serves", a.proc.name)
	if err := s.operator(5*time.Second, deleteCluster); !errors.Is(err, coordinator.ErrLeaseHeld) {
		return s.fail("cluster delete while %s serves: %v, want it refused", a.proc.name, err)
	}
	how := []string{"stops cleanly", "is killed", "is cut off from ZooKeeper"}[s.rng.IntN(3)]
	s.stage("%s %s", a.proc.name, how)
	switch how {
	case "stops cleanly":
		s.stop(a)
	case "is killed":
		s.kill(a, false)
	default:
		s.cutOff(&a.proc.zk, time.Now().Add(time.Hour))
	}
	s.stage("the operator deletes the cluster")
	deleted := false
	for range 60 {
		err := s.operator(5*time.Second, deleteCluster)
		if err == nil {
			deleted = true
			break
		}
		if !errors.Is(err, coordinator.ErrLeaseHeld) && !errors.Is(err, coordinator.ErrZKUnavailable) {
			return s.fail("cluster delete: %v", err)
		}
		s.pause(time.Second)
	}
	if !deleted {
		return s.fail("cluster delete still refused after a minute")
	}
	if s.rng.IntN(2) == 0 {
		s.stage("the operator creates the cluster again")
		cfg := defaultConfig()
		cfg.Layout, cfg.Epoch = s.world.layout(), "1999-12-01T00:00:00Z"
		l, err := cfg.parseLayout(time.Now())
		if err != nil {
			return err
		}
		spec := coordinator.ClusterSpec{Layout: l, RecycleAfter: 20 * time.Second}
		if err := s.operator(5*time.Second, func(a *coordinator.Admin) error {
			_, err := a.CreateCluster(s.bg(), snowCluster, spec)
			return err
		}); err != nil {
			return s.fail("cluster create: %v", err)
		}
	}
	behind := time.Duration(5000+s.rng.IntN(15000)) * time.Millisecond
	b := s.addNode("", -behind)
	s.stage("%s: a new machine, its clock %v behind, joins the cluster created again", b.key, behind)
	s.start(b)
	if !s.ready(b, 40*time.Second) {
		return s.fail("%s never served in the cluster created again", b.proc.name)
	}
	ns := []*snowNode{b}
	if a.proc != nil {
		ns = append(ns, a)
	}
	s.stage("batches to %d node(s)", len(ns))
	return s.issueFor(3*time.Second, ns...)
}
