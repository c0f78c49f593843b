//go:build chaos

package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/snowflake"
	"codeberg.org/snowflaked/snowflaked/tests/proc"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// Timeouts: generous, because race builds on a loaded CI machine are slow.
// None of them is a figure under test; the figures are measured and
// compared with their own bounds.
const (
	startTimeout = 30 * time.Second       // process start to "snowflaked starting" and /clock
	readyTimeout = 30 * time.Second       // to /readyz 200
	fastPoll     = 2 * time.Millisecond   // /readyz polling while measuring
	slowPoll     = 10 * time.Millisecond  // other polling
	zkSession    = 2 * time.Second        // --zk-session-timeout: a killed node's lease lingers this long
	ctlTimeout   = 2 * time.Second        // one control request (chaos offset, /readyz, /clock)
	warmupIDs    = 200                    // answers each node gives before a fault is injected
	leaveBound   = 200 * time.Millisecond // out of service this fast after a rollback beyond tolerance
)

// chaosOffsetEnv sets the chaos build's clock offset at start
// (node/chaos_on.go).
const chaosOffsetEnv = "SNOWFLAKED_CHAOS_CLOCK_OFFSET"

// ctl is the client of control requests (never the load's).
var ctl = &http.Client{Timeout: ctlTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}}

// harness is what every scenario shares: one ZooKeeper, an observer session
// on it, the run's summary and seed.
type harness struct {
	zk   *zkharness.Cluster
	obs  *zk.Conn
	sum  *Summary
	seed uint64
	long bool
}

type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}

func newHarness(t *testing.T, long bool, seed uint64, sum *Summary) *harness {
	t.Helper()
	zc := zkharness.StartStandalone(t)
	return &harness{zk: zc, obs: observe(t, zc), sum: sum, seed: seed, long: long}
}

// observe opens an observer session on zc, closed at cleanup.
func observe(t *testing.T, zc *zkharness.Cluster) *zk.Conn {
	t.Helper()
	conn, _, err := zk.Connect(strings.Split(zc.ConnectString(), ","), 10*time.Second, zk.WithLogger(quietLogger{}))
	if err != nil {
		t.Fatalf("observer session: %v", err)
	}
	t.Cleanup(conn.Close)
	return conn
}

// cluster is one scenario's snowflaked cluster (its own --cluster name on
// the shared ZooKeeper) and its checker.
type cluster struct {
	h       *harness
	t       *testing.T
	zk      *zkharness.Cluster // the ZooKeeper its nodes use: the harness's unless a scenario brings its own
	obs     *zk.Conn           // an observer session on zk
	name    string
	extra   []string // flags of every node, before each node's own
	checker *Checker
	nodes   []*node
	loads   []*Load
}

func (h *harness) newCluster(t *testing.T, name string) *cluster {
	t.Helper()
	c := &cluster{h: h, t: t, zk: h.zk, obs: h.obs, name: name, checker: NewChecker(snowflake.DefaultLayout())}
	t.Cleanup(func() {
		for _, l := range c.loads {
			_ = l.Stop() // idempotent; finish reports errors
		}
	})
	return c
}

// nodeOpts are a node's own flags and environment.
type nodeOpts struct {
	extra []string // flags after the common ones
	env   []string // KEY=VALUE, e.g. the chaos clock offset at start
}

// node is one snowflaked process (and its restarts: same node key, cache
// file and port). It is a load Target.
type node struct {
	c      *cluster
	name   string
	dir    string
	opts   nodeOpts
	addr   atomic.Value // string
	inc    atomic.Int32
	worker int64
	p      *proc.Proc
	alive  *aliveWatch
}

func (n *node) Name() string     { return n.name }
func (n *node) Addr() string     { s, _ := n.addr.Load().(string); return s }
func (n *node) Incarnation() int { return int(n.inc.Load()) }

// startNode starts a node and waits until it answers /clock (not until it
// is in service: see waitReadyz).
func (c *cluster) startNode(name string, opts nodeOpts) *node {
	c.t.Helper()
	n := &node{c: c, name: name, dir: c.t.TempDir(), opts: opts}
	n.start(opts.env)
	c.nodes = append(c.nodes, n)
	n.alive = watchAlive(c.t, c.obs, n.alivePath())
	return n
}

// startReady starts a node with no special option and waits until it is
// in service.
func (c *cluster) startReady(names ...string) []*node {
	c.t.Helper()
	var out []*node
	for _, name := range names {
		n := c.startNode(name, nodeOpts{})
		n.waitReadyz(http.StatusOK, time.Now(), readyTimeout)
		n.alive.wait(c.t, true, time.Time{}, readyTimeout)
		out = append(out, n)
	}
	return out
}

func (n *node) args() []string {
	listen := "127.0.0.1:0"
	if a := n.Addr(); a != "" {
		listen = a // a restart keeps its port
	}
	args := []string{
		"--listen", listen, "--zk", n.c.zk.ConnectString(), "--cluster", n.c.name, "--create-cluster",
		"--node-key", "chaos-" + n.name, "--cache-file", filepath.Join(n.dir, "cache.json"),
		"--log-format", "json", "--zk-session-timeout", zkSession.String(),
		// Peer verdicts only where a scenario asks for them: a peer round
		// while a node's clock is deliberately off would take it (or the
		// others) out of service and blur what is measured. A clock step
		// starts a peer round at once whatever the interval, so the
		// tolerance is wide too; scenarios about peers narrow it.
		"--peer-interval", "1h", "--peer-max-offset", "1m",
	}
	args = append(args, n.c.extra...)
	return append(args, n.opts.extra...)
}

// start runs the process (again) with env and waits for its worker ID.
func (n *node) start(env []string) {
	t := n.c.t
	t.Helper()
	n.p = proc.Start(t, "node "+n.name, binChaos, n.args(), proc.Env(env...))
	m, err := n.p.WaitLog("snowflaked starting", startTimeout)
	if err != nil {
		t.Fatal(err)
	}
	listen, _ := m["listen"].(string)
	if host, port, err := net.SplitHostPort(listen); err != nil || host != "127.0.0.1" || port == "0" {
		t.Fatalf("node %s: startup line has listen %q: %v", n.name, listen, m)
	}
	if old := n.Addr(); old != "" && old != listen {
		t.Fatalf("node %s restarted on %s, was %s", n.name, listen, old)
	}
	n.addr.Store(listen)
	var worker int64 = -1
	waitFor(t, startTimeout, "node "+n.name+" reports its worker ID on /clock", func() bool {
		r, err := n.clock()
		if err == nil && r.WorkerID >= 0 && r.Mode == "zookeeper" {
			worker = r.WorkerID
			return true
		}
		return false
	})
	if n.Incarnation() > 0 && worker != n.worker {
		t.Errorf("node %s: worker %d after a restart, was %d (same node key)", n.name, worker, n.worker)
	}
	n.worker = worker
}

// restart kills nothing: the previous process must have exited. It starts
// the next incarnation with env.
func (n *node) restart(env []string) {
	n.c.t.Helper()
	if !n.p.Exited() {
		n.c.t.Fatalf("node %s: restart while pid %d runs", n.name, n.p.Pid())
	}
	n.inc.Add(1) // before the new process can answer (Target.Incarnation)
	n.start(env)
}

// kill9 kills the process with SIGKILL and waits for it to exit.
func (n *node) kill9() {
	n.c.t.Helper()
	if err := n.p.Kill(); err != nil {
		n.c.t.Fatal(err)
	}
}

func (n *node) alivePath() string {
	return "/snowflaked/" + n.c.name + "/alive/" + strconv.FormatInt(n.worker, 10)
}

// clockReport is the part of GET /clock the scenarios read.
type clockReport struct {
	Mode         string `json:"mode"`
	WorkerID     int64  `json:"worker_id"`
	NowMs        int64  `json:"now_ms"`
	LastIssuedMs int64  `json:"last_issued_ms"`
	FenceMs      int64  `json:"fence_ms"`
	State        string `json:"state"`
	Reason       string `json:"reason"`
	Detail       string `json:"detail"`
}

func (n *node) clock() (clockReport, error) {
	var r clockReport
	code, body, err := n.get("/clock")
	if err != nil {
		return r, err
	}
	if code != http.StatusOK {
		return r, fmt.Errorf("node %s: /clock: %d %s", n.name, code, body)
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return r, fmt.Errorf("node %s: /clock %s: %w", n.name, body, err)
	}
	return r, nil
}

func (n *node) get(path string) (int, []byte, error) { return n.do(http.MethodGet, path) }

func (n *node) do(method, path string) (int, []byte, error) {
	req, err := http.NewRequest(method, "http://"+n.Addr()+path, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := ctl.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("node %s: %s %s: %w", n.name, method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, nil, fmt.Errorf("node %s: %s %s: read: %w", n.name, method, path, err)
	}
	return resp.StatusCode, b, nil
}

// setOffset sets the node's chaos clock offset and returns when the request
// was sent (the moment the fault happens, for measurements).
func (n *node) setOffset(d time.Duration) time.Time {
	n.c.t.Helper()
	sent := time.Now()
	code, body, err := n.do(http.MethodPost, "/debug/chaos/clock?offset="+d.String())
	if err != nil || code != http.StatusOK {
		n.c.t.Fatalf("node %s: POST offset=%s: %d %s %v", n.name, d, code, body, err)
	}
	return sent
}

// readyz returns the status of /readyz and, for a 503, its reason (checked
// to be documented by the cluster's checker).
func (n *node) readyz() (int, string, error) {
	code, body, err := n.get("/readyz")
	if err != nil {
		return 0, "", err
	}
	if code == http.StatusServiceUnavailable {
		n.c.checker.RecordReadyz(n.name, body)
		var r struct {
			Reason string `json:"reason"`
		}
		_ = json.Unmarshal(body, &r) // RecordReadyz reported a bad body
		return code, r.Reason, nil
	}
	return code, "", nil
}

// waitReadyz polls /readyz every fastPoll until it answers want and
// returns the time from since to the answer's arrival, and the reason of
// that answer if it is a 503, else of the last 503 seen while waiting.
func (n *node) waitReadyz(want int, since time.Time, timeout time.Duration) (time.Duration, string) {
	n.c.t.Helper()
	deadline := time.Now().Add(timeout)
	var code int
	var reason, seen string
	var err error
	for range int(timeout/fastPoll) + 1 {
		code, reason, err = n.readyz()
		if reason != "" {
			seen = reason
		}
		if err == nil && code == want {
			return time.Since(since), seen
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(fastPoll)
	}
	n.c.t.Fatalf("node %s: /readyz still %d %s (%v) after %s, want %d", n.name, code, reason, err, timeout, want)
	return 0, ""
}

// startLoad starts load generators on nodes with the run's seed.
func (c *cluster) startLoad(nodes ...*node) *Load {
	c.t.Helper()
	targets := make([]Target, len(nodes))
	for i, n := range nodes {
		targets[i] = n
	}
	l := StartLoad(c.checker, targets, LoadConfig{Seed: c.h.seed + uint64(len(c.loads)), MaxDuration: 15 * time.Minute})
	c.loads = append(c.loads, l)
	return l
}

// warmUp waits until every node has answered warmupIDs requests since the
// call.
func (c *cluster) warmUp(nodes ...*node) {
	c.t.Helper()
	before := c.counts(nodes...)
	waitFor(c.t, readyTimeout, fmt.Sprintf("%d answers from each node", warmupIDs), func() bool {
		for _, n := range nodes {
			if c.checker.Counts(n.name).OK-before[n.name].OK < warmupIDs {
				return false
			}
		}
		return true
	})
}

func (c *cluster) counts(nodes ...*node) map[string]NodeCounts {
	out := map[string]NodeCounts{}
	for _, n := range nodes {
		out[n.name] = c.checker.Counts(n.name)
	}
	return out
}

// expectNoErrors fails the test if a node answered anything but IDs since
// the snapshot before.
func (c *cluster) expectNoErrors(what string, before map[string]NodeCounts, nodes ...*node) {
	c.t.Helper()
	for _, n := range nodes {
		d := c.checker.Counts(n.name).Sub(before[n.name])
		if d.Errors() != 0 {
			c.t.Errorf("%s: node %s had errors: %s", what, n.name, d)
		} else if d.OK == 0 {
			c.t.Errorf("%s: node %s served nothing meanwhile: %s", what, n.name, d)
		}
	}
}

// finish stops the load, runs the checker and adds the scenario to the
// summary. Any problem fails the test.
func (c *cluster) finish() {
	c.t.Helper()
	for _, l := range c.loads {
		if err := l.Stop(); err != nil {
			c.t.Error(err)
		}
	}
	r := c.checker.Verify()
	unavailable := map[string]int64{}
	for _, n := range c.nodes {
		counts := c.checker.Counts(n.name)
		c.t.Logf("node %s (worker %d): %s", n.name, n.worker, counts)
		for k, v := range counts.Unavailable {
			unavailable[k] += v
		}
	}
	c.t.Logf("checker: %s", r)
	c.h.sum.AddScenario(scenarioName(c.t), r, unavailable)
	if !r.OK() {
		c.t.Errorf("checker found problems: %s", r)
	}
	if r.IDs == 0 {
		c.t.Error("no ID checked: the scenario proved nothing")
	}
}

// scenarioName is the scenario's name in the summary: the subtest's own
// name, without TestIntegration_Chaos/.
func scenarioName(t *testing.T) string {
	name := t.Name()
	if i := strings.LastIndex(name, "/"); i >= 0 {
		name = name[i+1:]
	}
	return name
}

// aliveWatch follows one alive znode with ZooKeeper watches and records
// when it appears and disappears.
type aliveWatch struct {
	path string
	mu   sync.Mutex
	evs  []aliveEvent
	err  error
	stop chan struct{}
	done chan struct{}
}

type aliveEvent struct {
	at      time.Time
	present bool
}

func watchAlive(t *testing.T, obs *zk.Conn, path string) *aliveWatch {
	t.Helper()
	w := &aliveWatch{path: path, stop: make(chan struct{}), done: make(chan struct{})}
	go w.run(obs)
	t.Cleanup(func() {
		close(w.stop)
		<-w.done
	})
	return w
}

func (w *aliveWatch) run(conn *zk.Conn) {
	defer close(w.done)
	for range 100000 { // bounded; stop ends it first
		exists, _, ch, err := conn.ExistsW(w.path)
		if err != nil {
			w.mu.Lock()
			w.err = err
			w.mu.Unlock()
			select {
			case <-w.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		w.record(exists, time.Now())
		select {
		case <-w.stop:
			return
		case ev := <-ch:
			switch ev.Type {
			case zk.EventNodeDeleted:
				w.record(false, time.Now())
			case zk.EventNodeCreated:
				w.record(true, time.Now())
			}
		}
	}
}

// record adds a state when it differs from the last one.
func (w *aliveWatch) record(present bool, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := len(w.evs); n > 0 && w.evs[n-1].present == present {
		return
	}
	w.evs = append(w.evs, aliveEvent{at: at, present: present})
}

// first returns the first time after since the znode was seen present (or
// gone).
func (w *aliveWatch) first(present bool, since time.Time) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range w.evs {
		if e.present == present && !e.at.Before(since) {
			return e.at, true
		}
	}
	return time.Time{}, false
}

// present reports the last known state.
func (w *aliveWatch) present() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.evs) > 0 && w.evs[len(w.evs)-1].present
}

// wait waits until the znode is seen present (or gone) after since and
// returns the time from since.
func (w *aliveWatch) wait(t *testing.T, present bool, since time.Time, timeout time.Duration) time.Duration {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for range int(timeout/slowPoll) + 1 {
		if at, ok := w.first(present, since); ok {
			return at.Sub(since)
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(slowPoll)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	t.Fatalf("%s: not seen present=%v within %s (states seen: %v; last ZooKeeper error: %v)", w.path, present, timeout, w.evs, w.err)
	return 0
}

// waitFor polls cond every slowPoll until it holds; it fails the test after
// timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	pollUntil(t, timeout, slowPoll, what, cond)
}
