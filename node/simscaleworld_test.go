package node

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"codeberg.org/snowflaked/snowflaked/client/wire"
	"codeberg.org/snowflaked/snowflaked/internal/disk"
	"codeberg.org/snowflaked/snowflaked/internal/zkconn"
	"codeberg.org/snowflaked/snowflaked/internal/zkconn/zkmem"
)

// The world of the scale simulation (simscale_test.go): n whole nodes
// (node.Run, as in sim_test.go) against one in-memory ZooKeeper that
// passes every request and counts it by node key and op, in the bubble's
// virtual time. Nothing fails here: the figures are what the shipped
// code asks of ZooKeeper and of its peers when all goes well.

const (
	scaleCluster = "scale"
	// scaleLayout has 10 worker bits: 1,024 worker IDs. Each world's
	// --worker-id-range is its own size (0-63 for 64 nodes), so that new
	// node keys recycle at every size.
	scaleLayout = "41/10/12"
	// scalePeerInterval is --peer-interval: a peer check round every 5
	// virtual seconds (each virtual second of 1,024 nodes costs real
	// time: their clock samplers and renewals run).
	scalePeerInterval = 5 * time.Second
	// scaleRecycleAfter is the cluster's --recycle-after.
	scaleRecycleAfter = 10 * time.Second
	// scaleBatch is how many IDs each node issues at each check of the IDs.
	scaleBatch = 4
)

// scaleOps counts ZooKeeper requests by kind.
type scaleOps struct {
	reads  int64 // get, exists, children
	writes int64 // create, set, delete, multi
	other  int64 // sync, auth
	dials  int64 // clients opened (sessions), not requests
}

func (o scaleOps) requests() int64 { return o.reads + o.writes + o.other }

func (o scaleOps) plus(p scaleOps) scaleOps {
	return scaleOps{o.reads + p.reads, o.writes + p.writes, o.other + p.other, o.dials + p.dials}
}

func (o scaleOps) minus(p scaleOps) scaleOps {
	return scaleOps{o.reads - p.reads, o.writes - p.writes, o.other - p.other, o.dials - p.dials}
}

// scaleCounts is the injector's tally: by node key (the label's first
// element, simClients.dialer), and by op and path shape for the log.
type scaleCounts struct {
	mu    sync.Mutex
	byKey map[string]*scaleOps
	shape map[string]int64 // "get /snowflaked/scale/alive/*" → requests
	all   scaleOps
}

func newScaleCounts() *scaleCounts {
	return &scaleCounts{byKey: map[string]*scaleOps{}, shape: map[string]int64{}}
}

// inject is the server's injector: it counts r and passes it at once.
func (c *scaleCounts) inject(r zkmem.Request) zkmem.Fault {
	key, _, _ := strings.Cut(r.Client, "/")
	c.mu.Lock()
	defer c.mu.Unlock()
	o := c.byKey[key]
	if o == nil {
		o = &scaleOps{}
		c.byKey[key] = o
	}
	var d scaleOps
	switch r.Op {
	case "get", "exists", "children":
		d.reads = 1
	case "create", "set", "delete", "multi":
		d.writes = 1
	default:
		d.other = 1
	}
	*o = o.plus(d)
	c.all = c.all.plus(d)
	c.shape[r.Op+" "+pathShape(r.Path)]++
	return zkmem.Fault{}
}

// dialed counts a client opened by key's process.
func (c *scaleCounts) dialed(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o := c.byKey[key]
	if o == nil {
		o = &scaleOps{}
		c.byKey[key] = o
	}
	o.dials++
	c.all.dials++
}

// of returns key's counts so far.
func (c *scaleCounts) of(key string) scaleOps {
	c.mu.Lock()
	defer c.mu.Unlock()
	if o := c.byKey[key]; o != nil {
		return *o
	}
	return scaleOps{}
}

// total returns every count so far, and the requests by shape.
func (c *scaleCounts) total() (scaleOps, map[string]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	shape := make(map[string]int64, len(c.shape))
	for k, v := range c.shape {
		shape[k] = v
	}
	return c.all, shape
}

// pathShape puts * for a last path element with a digit in it: the
// requests of 1,024 nodes fold into a few lines.
func pathShape(p string) string {
	dir, base := filepath.Split(p)
	if strings.ContainsAny(base, "0123456789") {
		return dir + "*"
	}
	return p
}

// topShapes lists the n largest counts of after minus before, largest
// first, as "count op path".
func topShapes(before, after map[string]int64, n int) string {
	type kv struct {
		k string
		v int64
	}
	var all []kv
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			all = append(all, kv{k, d})
		}
	}
	slices.SortFunc(all, func(a, b kv) int {
		if a.v != b.v {
			return int(b.v - a.v)
		}
		return strings.Compare(a.k, b.k)
	})
	var b strings.Builder
	for i, e := range all {
		if i == n {
			break
		}
		fmt.Fprintf(&b, "\n\t\t%8d %s", e.v, e.k)
	}
	return b.String()
}

// scaleSim is one world of n nodes.
type scaleSim struct {
	t      *testing.T
	n      int
	dir    string
	srv    *zkmem.Server
	counts *scaleCounts
	nodes  []*scaleNode // every machine, in the order they were added
	issued simIssued
	simTrace
}

type scaleNode struct {
	slot  int
	key   string
	disk  *disk.Mem
	clock *simClock
	proc  *snowProc
	procs int
	// began is the node key's counts when its process last started (or
	// was last stopped for a restart): cost takes them from there.
	began scaleOps
	// cost is what the node key asked from began until it was seen in
	// service (waitInService).
	cost scaleOps
}

// newScaleSim is a world of size n with no node yet; dir holds the cache
// files' locks.
func newScaleSim(t *testing.T, n int, dir string) *scaleSim {
	s := &scaleSim{t: t, n: n, dir: dir, srv: zkmem.New(), counts: newScaleCounts(), issued: simIssued{}, simTrace: simTrace{dir: dir}}
	s.srv.SetInjector(s.counts.inject)
	return s
}

// addNode adds a machine with a new node key and an empty disk.
func (s *scaleSim) addNode() *scaleNode {
	slot := len(s.nodes)
	nd := &scaleNode{slot: slot, key: fmt.Sprintf("k%d", slot+1), disk: disk.NewMem(), clock: &simClock{origin: time.Now()}}
	s.nodes = append(s.nodes, nd)
	return nd
}

// config is nd's configuration for process p: sim_test.go's, with the
// scale world's layout, range and peer interval.
func (s *scaleSim) config(nd *scaleNode, p *snowProc) Config {
	cfg := defaultConfig()
	cfg.Listen = "127.0.0.1:0"
	// Nothing listens there (port 1 of a loopback address of its own): a
	// peer's /time exchange fails at once, and the peer check counts it
	// (clockguard.PeerSnapshot.UnreachablePeers).
	cfg.Advertise = fmt.Sprintf("127.1.%d.%d:1", nd.slot/256, nd.slot%256)
	cfg.NodeKey = nd.key
	cfg.Cluster = scaleCluster
	cfg.ZK, cfg.CreateCluster = "127.0.0.1:2181", true
	cfg.ZKSessionTimeout = 4 * time.Second
	cfg.CacheFile = filepath.Join(s.dir, fmt.Sprintf("slot%d", nd.slot), "cache.json")
	cfg.Layout = scaleLayout
	cfg.WorkerIDRange = fmt.Sprintf("0-%d", s.n-1)
	cfg.Epoch = "1999-12-01T00:00:00Z" // the bubble's clock starts in 2000
	cfg.RecycleAfter = scaleRecycleAfter
	cfg.ZKFenceAhead = 6 * time.Second
	cfg.ReportInterval = time.Second
	cfg.PeerInterval = scalePeerInterval
	cfg.MaxStartWait = 10 * time.Second
	cfg.ShutdownTimeout = 4 * time.Second
	dial := p.zk.dialer(s.srv, p.name)
	cfg.seams = &seams{disk: p.dproc, dial: func(servers []string, opt zkconn.Options) (zkconn.Conn, error) {
		s.counts.dialed(nd.key)
		return dial(servers, opt)
	}}
	return cfg
}

// start starts a process on nd (its disk as it is).
func (s *scaleSim) start(nd *scaleNode) {
	nd.procs++
	p := &snowProc{name: fmt.Sprintf("%s/%d", nd.key, nd.procs), dproc: nd.disk.Process(), done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	ln := fasthttputil.NewInmemoryListener()
	cfg := withSeams(s.config(nd, p), withClock(nd.clock), withListener(ln), withBuilt(func(n *node) { p.n.Store(n) }))
	go func() { p.done <- Run(ctx, cfg, zerolog.Nop()) }()
	nd.proc = p
	s.logf("%s: start", p.name)
}

// stopAll stops the processes of nodes cleanly, all at once, and waits
// for them to end.
func (s *scaleSim) stopAll(nodes []*scaleNode) error {
	for _, nd := range nodes {
		nd.proc.cancel()
	}
	var errs []string
	for _, nd := range nodes {
		p := nd.proc
		if err := <-p.done; err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", p.name, err))
		}
		p.zk.end(false)
		nd.proc = nil
	}
	if len(errs) > 0 {
		return s.fail("a clean stop failed: %s", strings.Join(errs[:min(len(errs), 5)], "; "))
	}
	return nil
}

// live returns the nodes with a running process.
func (s *scaleSim) live() []*scaleNode {
	var out []*scaleNode
	for _, nd := range s.nodes {
		if nd.proc != nil {
			out = append(out, nd)
		}
	}
	return out
}

// serving returns nd's node when it is in service.
func serving(nd *scaleNode) *node {
	if nd.proc == nil {
		return nil
	}
	if n := nd.proc.n.Load(); n != nil && n.guard.Ready() {
		return n
	}
	return nil
}

// waitInService waits, polling every poll of virtual time, until every
// one of nodes is in service, at most limit; each node's cost is then
// what its node key asked from its began until it was first seen in
// service. It returns how long the wait took.
func (s *scaleSim) waitInService(nodes []*scaleNode, poll, limit time.Duration) (time.Duration, error) {
	t0 := time.Now()
	waiting := slices.Clone(nodes)
	for len(waiting) > 0 {
		waiting = slices.DeleteFunc(waiting, func(nd *scaleNode) bool {
			if serving(nd) == nil {
				return false
			}
			nd.cost = s.counts.of(nd.key).minus(nd.began)
			return true
		})
		if len(waiting) == 0 {
			break
		}
		for _, nd := range waiting {
			select {
			case err := <-nd.proc.done:
				nd.proc.done <- err
				return 0, s.fail("%s exited before it was in service: %v", nd.proc.name, err)
			default:
			}
		}
		if time.Since(t0) >= limit {
			return 0, s.fail("%d of %d nodes not in service after %v; first: %s", len(waiting), len(nodes), limit, s.why(waiting[0]))
		}
		time.Sleep(poll)
	}
	return time.Since(t0), nil
}

// why says what keeps nd out of service.
func (s *scaleSim) why(nd *scaleNode) string {
	n := nd.proc.n.Load()
	if n == nil {
		return nd.proc.name + ": not built yet (claiming)"
	}
	detail := ""
	if n.coord != nil {
		detail = n.coord.Status().LeaseDetail
	}
	return fmt.Sprintf("%s: %+v; lease: %s", nd.proc.name, n.guard.Status(), detail)
}

// checkIDs has every live node issue a batch through its handler and
// checks each ID (never issued before, increasing within its process:
// simIssued), and that the live nodes hold distinct worker IDs.
func (s *scaleSim) checkIDs() error {
	holder := map[int64]string{}
	for _, nd := range s.live() {
		n := serving(nd)
		if n == nil {
			return s.fail("%s out of service: %s", nd.proc.name, s.why(nd))
		}
		w := n.ident.entry.WorkerID
		if other, dup := holder[w]; dup {
			return s.fail("worker ID %d held by both %s and %s", w, other, nd.proc.name)
		}
		holder[w] = nd.proc.name
		var ctx fasthttp.RequestCtx
		var req fasthttp.Request
		req.SetRequestURI("/ids?count=" + strconv.Itoa(scaleBatch))
		ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9}, nil)
		n.srv.Handler()(&ctx)
		if ctx.Response.StatusCode() != fasthttp.StatusOK {
			return s.fail("%s: /ids: %d %.80s", nd.proc.name, ctx.Response.StatusCode(), ctx.Response.Body())
		}
		lines := strings.Fields(string(ctx.Response.Body()))
		if len(lines) != scaleBatch {
			return s.fail("%s: /ids?count=%d answered %d IDs", nd.proc.name, scaleBatch, len(lines))
		}
		for _, l := range lines {
			id, err := strconv.ParseInt(l, 10, 64)
			if err != nil {
				return s.fail("%s: /ids answered %q", nd.proc.name, l)
			}
			if err := s.issued.record(&s.simTrace, "snowflake", nd.proc.name, &nd.proc.last, id); err != nil {
				return err
			}
		}
	}
	return nil
}

// peerTotals sums the live nodes' peer check rounds and the peers those
// rounds asked (all unreachable here: every exchange asked counts).
func (s *scaleSim) peerTotals() (rounds, asked int64) {
	for _, nd := range s.live() {
		if n := nd.proc.n.Load(); n != nil && n.peers != nil {
			snap := n.peers.Snapshot()
			rounds += snap.Rounds
			asked += snap.UnreachablePeers
		}
	}
	return rounds, asked
}

// foreverCount is how many forever znodes the cluster has.
func (s *scaleSim) foreverCount() int {
	return len(s.srv.Children(wire.ClusterPath(scaleCluster) + "/forever"))
}
