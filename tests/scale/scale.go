//go:build linux

// Package scale measures what a snowflaked cluster costs per node: real
// snowflaked processes on 127.0.0.1 against one real standalone ZooKeeper
// (tests/zkharness), for several cluster sizes N in turn. For each N it
// reports the time until all N are in service, ZooKeeper requests per node
// per second over a steady window (mntr), peer /time requests served per
// node per second (the nodes' /metrics), CPU and RSS per node (/proc), and
// the cost of recycling worker IDs: R nodes are stopped and retired
// (snowflakectl node retire) and R new node keys started, which must all
// take over the retired worker IDs (each cluster's --worker-id-range holds
// exactly N IDs, so a new key finds no unused one).
//
// It is not part of go test ./... or make test: the driver is TestScale,
// behind the build tag scale, which make scale (scripts/scale.sh) runs:
//
//	make scale                                    # N = 32 64 96, 60 s windows, R = 48
//	SCALE_NODES="16 32" SCALE_WINDOW=20s make scale
//
// The table goes to bin/scale-report.md and the raw numbers to
// bin/scale-report.json; the nodes' logs stay in bin/scale-run/.
package scale

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// Defaults of Config, as ConfigFromEnv applies them.
const (
	DefaultNodes   = "32 64 96"
	DefaultWindow  = 60 * time.Second
	DefaultSettle  = 10 * time.Second
	DefaultRecycle = 48
	DefaultLayout  = "41/10/12"
)

// Bounds of the phases.
const (
	mntrEvery      = 5 * time.Second  // ZooKeeper sampled in the window (outstanding requests)
	ctlTimeout     = 30 * time.Second // one snowflakectl command
	retireDeadline = 60 * time.Second // retiring one node key, retries included (its lease must be gone)
	scrapeWorkers  = 8
	maxNodes       = 1000
)

// Config is what a scale run does.
type Config struct {
	// Nodes are the cluster sizes, run one after another (SCALE_NODES,
	// space- or comma-separated).
	Nodes []int
	// Window is the steady window measured once all nodes are in service
	// and Settle has passed (SCALE_WINDOW, SCALE_SETTLE).
	Window, Settle time.Duration
	// Recycle is R, the node keys stopped, retired and replaced by new ones
	// (SCALE_RECYCLE); at most N of a cluster of N, 0 skips the phase.
	Recycle int
	// BinDir holds snowflaked and snowflakectl (SCALE_BIN; make build).
	BinDir string
	// OutDir receives scale-report.md and scale-report.json (SCALE_OUT;
	// SCALE_BIN and SCALE_OUT are relative to the repository root).
	OutDir string
	// WorkDir holds the nodes' cache files and logs; it is emptied first.
	WorkDir string
	// Layout is every cluster's --layout (SCALE_LAYOUT).
	Layout string
	// NodeFlags are extra flags for every node (SCALE_NODE_FLAGS, split at
	// spaces), e.g. "--peer-interval 10s".
	NodeFlags []string
}

// ConfigFromEnv reads Config from the SCALE_* environment variables, with
// the defaults above; root is the repository root (bin/ below it).
func ConfigFromEnv(root string) (Config, error) {
	c := Config{Window: DefaultWindow, Settle: DefaultSettle, Recycle: DefaultRecycle, Layout: DefaultLayout,
		BinDir: filepath.Join(root, "bin"), OutDir: filepath.Join(root, "bin")}
	nodes := cmp(os.Getenv("SCALE_NODES"), DefaultNodes)
	for f := range strings.FieldsFuncSeq(nodes, func(r rune) bool { return r == ' ' || r == ',' }) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > maxNodes {
			return c, fmt.Errorf("SCALE_NODES=%q: want cluster sizes 1..%d", nodes, maxNodes)
		}
		c.Nodes = append(c.Nodes, n)
	}
	if len(c.Nodes) == 0 {
		return c, fmt.Errorf("SCALE_NODES=%q: no cluster size", nodes)
	}
	for _, d := range []struct {
		env string
		to  *time.Duration
	}{{"SCALE_WINDOW", &c.Window}, {"SCALE_SETTLE", &c.Settle}} {
		if v := os.Getenv(d.env); v != "" {
			x, err := time.ParseDuration(v)
			if err != nil || x < 0 || x > time.Hour {
				return c, fmt.Errorf("%s=%q: want a duration up to 1h (e.g. 60s)", d.env, v)
			}
			*d.to = x
		}
	}
	if c.Window < time.Second {
		return c, fmt.Errorf("SCALE_WINDOW=%v: want at least 1s", c.Window)
	}
	if v := os.Getenv("SCALE_RECYCLE"); v != "" {
		r, err := strconv.Atoi(v)
		if err != nil || r < 0 {
			return c, fmt.Errorf("SCALE_RECYCLE=%q: want a count >= 0", v)
		}
		c.Recycle = r
	}
	for env, to := range map[string]*string{"SCALE_BIN": &c.BinDir, "SCALE_OUT": &c.OutDir} {
		if v := os.Getenv(env); v != "" {
			*to = v
			if !filepath.IsAbs(v) {
				*to = filepath.Join(root, v) // relative to the repository, not to the test's folder
			}
		}
	}
	c.Layout = cmp(os.Getenv("SCALE_LAYOUT"), c.Layout)
	c.NodeFlags = strings.Fields(os.Getenv("SCALE_NODE_FLAGS"))
	c.WorkDir = filepath.Join(c.OutDir, "scale-run")
	return c, nil
}

// cmp returns s, or def when s is empty.
func cmp(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}

// zooKeeper is the run's ZooKeeper server.
type zooKeeper struct {
	addr string
	pid  int // the JVM; 0 when it could not be found (no ZooKeeper CPU and RSS then)
}

// startZooKeeper starts a standalone ZooKeeper (zkharness, 4lw whitelisted)
// and restarts it once with maxClientCnxns=0: every node connects from
// 127.0.0.1, and ZooKeeper's default allows 60 connections per address.
func startZooKeeper(t testing.TB) (zooKeeper, error) {
	c := zkharness.StartStandalone(t)
	s := c.Servers[0]
	dir := filepath.Dir(s.LogPath())
	if err := s.Stop(); err != nil {
		return zooKeeper{}, err
	}
	f, err := os.OpenFile(filepath.Join(dir, "zoo.cfg"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return zooKeeper{}, err
	}
	_, err = f.WriteString("maxClientCnxns=0\n")
	if err := errors.Join(err, f.Close()); err != nil {
		return zooKeeper{}, err
	}
	if err := s.Start(); err != nil {
		return zooKeeper{}, err
	}
	if err := s.WaitServing(zkharness.StartTimeout); err != nil {
		return zooKeeper{}, err
	}
	return zooKeeper{addr: s.ClientAddr(), pid: findPidByCwd(dir, "QuorumPeerMain")}, nil
}

// Run runs the scale measurement cfg describes and returns its report,
// written to cfg.OutDir after each cluster size (a run cut short keeps the
// sizes done). It fails t when a size cannot be measured; ZooKeeper and
// every process it started are killed by t's cleanups, and each size's
// nodes are stopped before the next size starts. SIGINT and SIGTERM cut
// the run short.
func Run(t testing.TB, cfg Config) *Report {
	t.Helper()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	r := &Report{Started: time.Now(), Host: hostInfo(), Version: binVersion(filepath.Join(cfg.BinDir, "snowflaked")),
		Layout: cfg.Layout, WindowS: cfg.Window.Seconds(), SettleS: cfg.Settle.Seconds(), RecycleWant: cfg.Recycle}
	for _, b := range []string{"snowflaked", "snowflakectl"} {
		if _, err := os.Stat(filepath.Join(cfg.BinDir, b)); err != nil {
			t.Fatalf("scale: %v (make build first)", err)
		}
	}
	if err := os.RemoveAll(cfg.WorkDir); err != nil {
		t.Fatalf("scale: %v", err)
	}
	zk, err := startZooKeeper(t)
	if err != nil {
		t.Fatalf("scale: ZooKeeper: %v", err)
	}
	r.ZooKeeper = mntrVersion(zk.addr)
	r.NodeFlags = append([]string{"--zk", zk.addr, "--cluster", "scale-<N>", "--layout", cfg.Layout,
		"--worker-id-range", "0-<N-1>"}, cfg.NodeFlags...)
	r.Notes = append(r.Notes,
		"one cluster per N, created with `snowflakectl cluster create scale-<N> --layout "+cfg.Layout+
			" --worker-id-range 0-<N-1>` (recycle-after 24h): the range holds exactly N worker IDs, so every new key of the recycle phase must take over a retired one",
		"NTP off (no --ntp, as scripts/run.sh); peer clock checks, report interval, fence and session timeouts at their defaults unless listed above",
		fmt.Sprintf("recycle: R = min(SCALE_RECYCLE=%d, N) nodes stopped with SIGTERM, their keys retired (`snowflakectl node retire`), R new keys started at once", cfg.Recycle))
	if cfg.Window < 2*peerInterval(cfg.NodeFlags) {
		r.Notes = append(r.Notes, fmt.Sprintf("the window is shorter than two --peer-interval (%v): nodes started together check their peers together, so /time and peer-round rates are noisy", peerInterval(cfg.NodeFlags)))
	}
	if zk.pid == 0 {
		r.Notes = append(r.Notes, "the ZooKeeper JVM's pid was not found: no ZooKeeper CPU and RSS")
	}
	for _, n := range cfg.Nodes {
		if ctx.Err() != nil {
			break
		}
		res := runSize(ctx, t, cfg, zk, n)
		r.Results = append(r.Results, res)
		if err := r.WriteFiles(cfg.OutDir); err != nil {
			t.Errorf("scale: write report: %v", err)
		}
		if res.Error != "" {
			t.Errorf("scale: N=%d: %s", n, res.Error)
		}
	}
	if ctx.Err() != nil {
		t.Errorf("scale: interrupted")
	}
	return r
}

// sizeRun is the measurement of one cluster size.
type sizeRun struct {
	ctx     context.Context
	t       testing.TB
	cfg     Config
	zk      zooKeeper
	n       int
	cluster string
	dir     string
	res     *Result

	mu    sync.Mutex
	nodes []*node // every node started, stopped ones included
}

// runSize measures a cluster of n nodes; the nodes are stopped when it
// returns (and by t's cleanup should the driver stop first).
func runSize(ctx context.Context, t testing.TB, cfg Config, zk zooKeeper, n int) Result {
	s := &sizeRun{ctx: ctx, t: t, cfg: cfg, zk: zk, n: n, cluster: fmt.Sprintf("scale-%d", n),
		dir: filepath.Join(cfg.WorkDir, fmt.Sprintf("n%d", n)), res: &Result{Nodes: n}}
	s.res.Cluster = s.cluster
	t.Cleanup(func() { s.killAll() })
	defer func() {
		if err := stopAll(s.all()); err != nil {
			t.Logf("scale: N=%d: stopping the nodes: %v", n, err)
		}
	}()
	if err := s.run(); err != nil {
		s.res.Error = err.Error()
	}
	return *s.res
}

// all returns every node started.
func (s *sizeRun) all() []*node {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.nodes)
}

// killAll SIGKILLs every node still running.
func (s *sizeRun) killAll() {
	for _, n := range s.all() {
		if err := n.kill(); err != nil {
			s.t.Errorf("scale: %v", err)
		}
	}
}

// logf reports progress.
func (s *sizeRun) logf(format string, args ...any) {
	s.t.Logf("scale: N=%d: "+format, append([]any{s.n}, args...)...)
}

// run is the phases of one size, in turn.
func (s *sizeRun) run() error {
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return err
	}
	if out, err := s.ctl("cluster", "create", s.cluster, "--zk", s.zk.addr, "--layout", s.cfg.Layout,
		"--worker-id-range", fmt.Sprintf("0-%d", s.n-1)); err != nil {
		return fmt.Errorf("cluster create: %w: %s", err, out)
	}
	live, err := s.start()
	if err != nil {
		return err
	}
	if err := s.sleep(live, s.cfg.Settle); err != nil {
		return err
	}
	end, err := s.window(live)
	if err != nil {
		return err
	}
	r := min(s.cfg.Recycle, s.n)
	if r == 0 {
		return nil
	}
	return s.recycle(live, end, r)
}

// ctl runs bin/snowflakectl with args.
func (s *sizeRun) ctl(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(s.ctx, ctlTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(s.cfg.BinDir, "snowflakectl"), args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// launch starts one node per key, each on a free port.
func (s *sizeRun) launch(keys []string) ([]*node, error) {
	ports, err := zkharness.FreePorts(len(keys))
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(s.cfg.BinDir, "snowflaked")
	var out []*node
	for i, key := range keys {
		addr := fmt.Sprintf("127.0.0.1:%d", ports[i])
		kdir := filepath.Join(s.dir, key)
		if err := os.MkdirAll(kdir, 0o755); err != nil {
			return out, err
		}
		args := append([]string{"--zk", s.zk.addr, "--cluster", s.cluster, "--layout", s.cfg.Layout,
			"--worker-id-range", fmt.Sprintf("0-%d", s.n-1), "--listen", addr, "--node-key", key,
			"--cache-file", filepath.Join(kdir, "cache.json")}, s.cfg.NodeFlags...)
		nd, err := startNode(bin, key, addr, filepath.Join(kdir, "node.log"), args)
		if err != nil {
			return out, err
		}
		s.mu.Lock()
		s.nodes = append(s.nodes, nd)
		s.mu.Unlock()
		out = append(out, nd)
	}
	return out, nil
}

// readyDeadline bounds the wait for k nodes to come into service: starting
// many Go processes and their ZooKeeper sessions on two cores takes a while.
func readyDeadline(k int) time.Time {
	return time.Now().Add(60*time.Second + time.Duration(k)*time.Second)
}

// start starts the n nodes at once and waits until all are in service.
func (s *sizeRun) start() ([]*node, error) {
	m0, err := mntr(s.zk.addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	keys := make([]string, s.n)
	for i := range keys {
		keys[i] = fmt.Sprintf("node-%03d", i)
	}
	t0 := time.Now()
	nodes, err := s.launch(keys)
	if err != nil {
		return nil, err
	}
	took, err := waitReady(s.ctx, nodes, readyDeadline(s.n))
	if err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	s.res.StartAllS = time.Since(t0).Seconds()
	s.res.StartMedianS = median(took)
	m1, err := mntr(s.zk.addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	s.res.StartZKPacketsPerKey = (m1[mntrPacketsReceived] - m0[mntrPacketsReceived]) / float64(s.n)
	s.logf("all %d in service after %.1fs (median %.1fs)", s.n, s.res.StartAllS, s.res.StartMedianS)
	return nodes, nil
}

// sleep waits d, failing early when a node exits or the run is cut short.
func (s *sizeRun) sleep(nodes []*node, d time.Duration) error {
	end := time.Now().Add(d)
	for range int(d/time.Second) + 2 {
		if err := s.check(nodes); err != nil {
			return err
		}
		left := time.Until(end)
		if left <= 0 {
			return nil
		}
		select {
		case <-time.After(min(left, time.Second)):
		case <-s.ctx.Done():
			return s.ctx.Err()
		}
	}
	return nil
}

// check fails when a node exited or the run is cut short.
func (s *sizeRun) check(nodes []*node) error {
	if err := s.ctx.Err(); err != nil {
		return err
	}
	for _, n := range nodes {
		if n.exited() {
			return n.exitErr()
		}
	}
	return nil
}

// snapshot is the state of the cluster at one moment.
type snapshot struct {
	at      time.Time
	mntr    Mntr
	metrics []nodeMetrics
	procs   []procSample
	zkProc  procSample
}

// take samples ZooKeeper (mntr, its process) and every node (/metrics, /proc).
func (s *sizeRun) take(nodes []*node) (snapshot, error) {
	sn := snapshot{at: time.Now(), metrics: make([]nodeMetrics, len(nodes)), procs: make([]procSample, len(nodes))}
	errs := make([]error, len(nodes))
	sem := make(chan struct{}, scrapeWorkers)
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if sn.procs[i], errs[i] = readProc(n.pid()); errs[i] != nil {
				return
			}
			sn.metrics[i], errs[i] = scrape(s.ctx, n.addr)
		})
	}
	wg.Wait()
	var err error
	if sn.mntr, err = mntr(s.zk.addr, 5*time.Second); err != nil {
		return sn, err
	}
	if s.zk.pid != 0 {
		sn.zkProc, _ = readProc(s.zk.pid)
	}
	return sn, errors.Join(errs...)
}

// window measures the steady window; it returns the snapshot at its end.
func (s *sizeRun) window(nodes []*node) (snapshot, error) {
	a, err := s.take(nodes)
	if err != nil {
		return a, fmt.Errorf("window start: %w", err)
	}
	outstanding, watches, calls := a.mntr[mntrOutstanding], a.mntr[mntrWatches], 1
	end := a.at.Add(s.cfg.Window)
	for range int(s.cfg.Window/mntrEvery) + 2 {
		if err := s.sleep(nodes, min(mntrEvery, time.Until(end))); err != nil {
			return a, err
		}
		if !time.Now().Before(end) {
			break
		}
		if m, err := mntr(s.zk.addr, 5*time.Second); err == nil {
			outstanding = max(outstanding, m[mntrOutstanding])
			watches = max(watches, m[mntrWatches])
			calls++
		}
	}
	b, err := s.take(nodes)
	if err != nil {
		return b, fmt.Errorf("window end: %w", err)
	}
	s.res.DriverMntrCalls = calls + 1
	s.res.ZKOutstandingMax = max(outstanding, b.mntr[mntrOutstanding])
	fillWindow(s.res, a, b)
	s.res.ZKWatchesMaxPerNode = max(watches, b.mntr[mntrWatches]) / float64(s.n)
	s.logf("window %.0fs: %.2f ZK packets/node/s, %.2f /time served/node/s, CPU %.2f%%/node, RSS %.1f MiB/node",
		s.res.WindowS, s.res.ZKPacketsPerNodeS, s.res.TimeServedPerNodeS, s.res.NodeCPUPercentMean, s.res.NodeRSSMiBMean)
	return b, nil
}

// fillWindow computes the steady-window figures of res from the snapshots
// a and b taken at its start and end.
func fillWindow(res *Result, a, b snapshot) {
	n := float64(len(b.metrics))
	secs := b.at.Sub(a.at).Seconds()
	res.WindowS = secs
	rate := func(key string) float64 { return (b.mntr[key] - a.mntr[key]) / n / secs }
	res.ZKPacketsPerNodeS = rate(mntrPacketsReceived)
	res.ZKReadsPerNodeS = rate(mntrReads)
	res.ZKWritesPerNodeS = rate(mntrWrites)
	res.ZKConnsPerNode = b.mntr[mntrConns] / n
	res.ZKWatchesPerNode = b.mntr[mntrWatches] / n
	res.ZKEphemeralsPerNode = b.mntr[mntrEphemerals] / n
	res.ZKZnodes = b.mntr[mntrZnodes]
	res.MntrWindowStart, res.MntrWindowEnd = a.mntr.subset(), b.mntr.subset()
	if b.zkProc.rss > 0 {
		res.ZKCPUPercent = 100 * (b.zkProc.cpu - a.zkProc.cpu).Seconds() / secs
		res.ZKRSSMiB = float64(b.zkProc.rss) / (1 << 20)
	}
	var served, rounds, failed, reports, cpuSum, rssSum float64
	for i := range b.metrics {
		served += b.metrics[i].timeServed - a.metrics[i].timeServed
		rounds += b.metrics[i].peerRounds - a.metrics[i].peerRounds
		failed += b.metrics[i].peerFailed - a.metrics[i].peerFailed
		reports += b.metrics[i].fenceReports - a.metrics[i].fenceReports
		cpu := 100 * (b.procs[i].cpu - a.procs[i].cpu).Seconds() / secs
		rss := float64(b.procs[i].rss) / (1 << 20)
		cpuSum += cpu
		rssSum += rss
		res.NodeCPUPercentMax = max(res.NodeCPUPercentMax, cpu)
		res.NodeRSSMiBMax = max(res.NodeRSSMiBMax, rss)
	}
	res.TimeServedPerNodeS = served / n / secs
	res.PeerRoundsPerNodeS = rounds / n / secs
	res.PeerUnreachable = failed
	res.FenceReportsPerNodeS = reports / n / secs
	res.NodeCPUPercentMean = cpuSum / n
	res.NodeRSSMiBMean = rssSum / n
}

// recycle stops the last r nodes, retires their keys, starts r new keys
// and measures until they are all in service with the retired worker IDs.
func (s *sizeRun) recycle(live []*node, steady snapshot, r int) error {
	c := &s.res.Recycle
	c.Keys = r
	victims := live[len(live)-r:]
	freed := map[int64]bool{}
	for _, m := range steady.metrics[len(live)-r:] {
		freed[m.workerID] = true
	}
	t0 := time.Now()
	if err := stopAll(victims); err != nil {
		return fmt.Errorf("recycle: stop: %w", err)
	}
	c.StopS = time.Since(t0).Seconds()
	t1 := time.Now()
	for _, v := range victims {
		if err := s.retire(v.key); err != nil {
			return err
		}
	}
	c.RetireS = time.Since(t1).Seconds()
	m0, err := mntr(s.zk.addr, 5*time.Second)
	if err != nil {
		return err
	}
	keys := make([]string, r)
	for i := range keys {
		keys[i] = fmt.Sprintf("new-%03d", i)
	}
	t2 := time.Now()
	fresh, err := s.launch(keys)
	if err != nil {
		return err
	}
	took, err := waitReady(s.ctx, fresh, readyDeadline(r))
	if err != nil {
		return fmt.Errorf("recycle: %w", err)
	}
	c.AllInServiceS = time.Since(t2).Seconds()
	c.MedianS = median(took)
	m1, err := mntr(s.zk.addr, 5*time.Second)
	if err != nil {
		return err
	}
	phase := time.Since(t2).Seconds()
	fillRecycle(c, s.res, m0, m1, float64(len(live)-r), phase)
	got, err := s.take(fresh)
	if err != nil {
		return fmt.Errorf("recycle: scrape the new nodes: %w", err)
	}
	seen := map[int64]bool{}
	for _, m := range got.metrics {
		if freed[m.workerID] && !seen[m.workerID] {
			c.Recycled++
		}
		seen[m.workerID] = true
	}
	s.logf("recycle: %d new keys in service after %.1fs, %.1f ZK packets/key (net %.1f), %d took a retired worker ID",
		r, c.AllInServiceS, c.PacketsPerKey, c.PacketsPerKeyNet, c.Recycled)
	if c.Recycled != r {
		return fmt.Errorf("recycle: only %d of %d new keys hold a retired worker ID", c.Recycled, r)
	}
	return nil
}

// fillRecycle computes the recycle figures from the mntr of the phase's
// start and end; others nodes ran through the phase's secs at the steady
// window's per-node rates of res.
func fillRecycle(c *Recycle, res *Result, m0, m1 Mntr, others, secs float64) {
	k := float64(c.Keys)
	c.PacketsPerKey = (m1[mntrPacketsReceived] - m0[mntrPacketsReceived]) / k
	c.ReadsPerKey = (m1[mntrReads] - m0[mntrReads]) / k
	c.WritesPerKey = (m1[mntrWrites] - m0[mntrWrites]) / k
	c.PacketsPerKeyNet = c.PacketsPerKey - others*secs*res.ZKPacketsPerNodeS/k
	c.ReadsPerKeyNet = c.ReadsPerKey - others*secs*res.ZKReadsPerNodeS/k
	c.WritesPerKeyNet = c.WritesPerKey - others*secs*res.ZKWritesPerNodeS/k
	c.MntrStart, c.MntrEnd = m0.subset(), m1.subset()
}

// retire runs snowflakectl node retire for key until it succeeds (the
// stopped node's lease may take a moment to go), bounded by retireDeadline.
func (s *sizeRun) retire(key string) error {
	deadline := time.Now().Add(retireDeadline)
	var out string
	var err error
	for range int(retireDeadline/(500*time.Millisecond)) + 1 {
		if out, err = s.ctl("node", "retire", key, "--cluster", s.cluster, "--zk", s.zk.addr); err == nil {
			return nil
		}
		if !time.Now().Before(deadline) || s.ctx.Err() != nil {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("recycle: snowflakectl node retire %s: %w: %s", key, err, out)
}

// peerInterval returns the nodes' --peer-interval: the last one flags
// set, else snowflaked's default (30s).
func peerInterval(flags []string) time.Duration {
	d := 30 * time.Second
	for i, f := range flags {
		v, ok := strings.CutPrefix(strings.TrimLeft(f, "-"), "peer-interval")
		switch {
		case !ok:
			continue
		case strings.HasPrefix(v, "="):
			v = v[1:]
		case v == "" && i+1 < len(flags):
			v = flags[i+1]
		default:
			continue
		}
		if x, err := time.ParseDuration(v); err == nil {
			d = x
		}
	}
	return d
}

// median returns the median of ds, in seconds.
func median(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2].Seconds()
}

// hostInfo describes the machine: CPUs, memory, kernel.
func hostInfo() string {
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				if f := strings.Fields(v); len(f) == 2 {
					if kb, err := strconv.ParseFloat(f[0], 64); err == nil {
						mem = fmt.Sprintf(", %.1f GiB memory", kb/(1<<20))
					}
				}
			}
		}
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return fmt.Sprintf("%d CPUs%s, Linux %s, %s", runtime.NumCPU(), mem, strings.TrimSpace(string(kernel)), runtime.Version())
}

// binVersion returns what bin --version prints.
func binVersion(bin string) string {
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return strings.TrimSpace(string(out))
}
