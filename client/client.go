// Package client is the Go client of snowflaked for application fleets.
//
// It finds the nodes (a static list, or ZooKeeper's alive/ znodes, which
// hold exactly the nodes in service), merges concurrent Next and NextN calls
// into GET /ids?count=N batches (one round trip for many callers: a node
// issues up to 4,096,000 IDs/s, far more than it serves requests), and
// routes around nodes that fail: a 503 (any reason: a node out of service
// for its clock, say), a connection error or a timeout marks the node down
// (for its Retry-After, or until ZooKeeper shows it alive again) and the
// batch is retried on another node, within the callers' deadlines and a
// budget of attempts. A 4xx answer is returned, never retried.
//
// Guarantees: every ID handed out is unique, and no ID is handed out twice
// (an ID fetched but not handed out, because its caller gave up, is dropped,
// never stored). IDs a caller gets from one call increase; IDs from
// different nodes are unique but not ordered with each other. Optional
// prefetch keeps IDs fetched ahead for at most PrefetchMaxAge, so the time
// inside an ID lags the call by at most that; with it, one goroutine's
// successive Next calls are unique but not always increasing (a direct
// fetch can overtake the background refill).
package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/coordinator"
)

// Defaults of Config.
const (
	DefaultMaxBatch       = 1000
	DefaultTimeout        = 2 * time.Second
	DefaultAttempts       = 3
	DefaultMaxInFlight    = 1
	DefaultStallAfter     = 50 * time.Millisecond
	DefaultDownFor        = time.Second
	DefaultPrefetchMaxAge = time.Second
	// MaxCount bounds NextN's n.
	MaxCount = 1 << 20
)

// Sentinel errors callers branch on.
var (
	// ErrInvalidConfig is wrapped by New's errors.
	ErrInvalidConfig = errors.New("invalid client config")
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("client closed")
	// ErrNoNode: no node could serve the call; the error names each node's
	// last failure.
	ErrNoNode = errors.New("no snowflaked node available")
	// ErrRejected: a node answered 4xx (bad input); never retried.
	ErrRejected = errors.New("request rejected by snowflaked")
)

// Config configures a Client: either Servers or ZK.
type Config struct {
	// Servers is a static list of nodes, "host:port" each.
	Servers []string
	// ZK lists ZooKeeper servers ("host:port"): the client follows the
	// cluster's alive/ znodes instead of a static list. Cluster defaults to
	// "default"; ZKAuth is "user:password" when the znodes are protected.
	ZK      []string
	Cluster string
	ZKAuth  string
	// MaxBatch bounds one /ids request (default 1000; at most the nodes'
	// --max-batch). A batch asks for exactly what the callers waiting want,
	// never more.
	MaxBatch int
	// Timeout bounds one request to one node (default 2s).
	Timeout time.Duration
	// Attempts is how many nodes one batch tries before it fails
	// (default 3).
	Attempts int
	// MaxInFlight bounds the batches in flight at once (default 1). Fewer
	// in flight make bigger batches (callers pile up meanwhile), so more
	// IDs per request and per second: with 64 callers on one node, 1 gave
	// 45 IDs a request, 2 gave 25 and 4 gave 14. A batch out longer than
	// StallAfter stops counting (see StallAfter).
	MaxInFlight int
	// StallAfter (default 50ms): a batch out longer than this (a node that
	// hangs, a lost packet) gives its in-flight slot up, so callers that
	// arrive meanwhile get a batch of their own on the next node; the
	// stalled batch's callers still wait for it, up to Timeout per node.
	StallAfter time.Duration
	// DownFor is how long a node that failed without a Retry-After (a
	// connection error, a timeout) gets no traffic (default 1s).
	DownFor time.Duration
	// Prefetch keeps up to this many IDs fetched ahead for Next (0: off).
	// PrefetchMaxAge drops prefetched IDs older than it (default 1s).
	Prefetch       int
	PrefetchMaxAge time.Duration
	// Hooks receive the client's events (nil ones are skipped).
	Hooks Hooks
	// Log receives a line per failover and per node marked down; the zero
	// Logger discards everything.
	Log zerolog.Logger
}

// Hooks are called on the client's goroutines: they must be quick and
// must not block. Wire them to a metrics library.
type Hooks struct {
	// Request: one HTTP request to node, with its status (0 when it got
	// none), error and duration.
	Request func(node string, status int, err error, d time.Duration)
	// Batch: a batch of n IDs was handed out.
	Batch func(n int)
	// Failover: a batch left node after err.
	Failover func(node string, err error)
}

// Stats are the client's counters since New.
type Stats struct {
	Requests  int64 // HTTP requests made
	Batches   int64 // batches handed out
	IDs       int64 // IDs handed out
	Failovers int64 // batches moved to another node
	Errors    int64 // calls that returned an error
}

// Client issues IDs from a snowflaked cluster. It is safe for concurrent
// use. Close it when done.
type Client struct {
	cfg  Config
	http *fasthttp.Client
	log  zerolog.Logger
	stop chan struct{}
	done sync.WaitGroup
	disc *coordinator.Discovery

	qmu      sync.Mutex
	queue    []*call // calls waiting for a batch, in arrival order
	inFlight int     // batches out (≤ MaxInFlight)

	mu    sync.Mutex
	nodes []*nodeState
	next  int // round-robin cursor

	pre prefetch

	requests, batches, ids, failovers, errs atomic.Int64
	closed                                  atomic.Bool
}

// nodeState is what the client knows of one node.
type nodeState struct {
	addr      string
	downUntil time.Time
	lastErr   error
}

// call is one Next/NextN waiting for its IDs.
type call struct {
	ctx context.Context
	n   int
	out chan result // buffered: a batch never blocks on a caller
}

type result struct {
	ids []int64
	err error
}

// New checks cfg and starts the client (in ZooKeeper mode it connects and
// reads the live nodes first).
func New(ctx context.Context, cfg Config) (*Client, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Client{
		cfg: cfg, log: cfg.Log,
		stop: make(chan struct{}),
		http: &fasthttp.Client{
			Name: "snowflaked-client", MaxIdemponentCallAttempts: 1, ReadTimeout: cfg.Timeout, WriteTimeout: cfg.Timeout,
			MaxConnsPerHost: 64, MaxIdleConnDuration: 30 * time.Second,
		},
	}
	if len(cfg.ZK) > 0 {
		c.disc, err = coordinator.Discover(ctx, coordinator.DiscoveryConfig{Servers: cfg.ZK, Cluster: cfg.Cluster, Auth: cfg.ZKAuth, Log: cfg.Log}, c.setNodes)
		if err != nil {
			return nil, fmt.Errorf("new client: %w", err)
		}
	} else {
		peers := make([]coordinator.Peer, len(cfg.Servers))
		for i, s := range cfg.Servers {
			peers[i] = coordinator.Peer{WorkerID: int64(i), Addr: s}
		}
		c.setNodes(peers)
	}
	c.pre.init(cfg.Prefetch)
	if cfg.Prefetch > 0 {
		c.done.Add(1)
		go c.prefetchLoop()
	}
	return c, nil
}

func (cfg Config) withDefaults() (Config, error) {
	bad := func(format string, a ...any) (Config, error) {
		return Config{}, fmt.Errorf("new client: %w: %s", ErrInvalidConfig, fmt.Sprintf(format, a...))
	}
	switch {
	case len(cfg.Servers) == 0 && len(cfg.ZK) == 0:
		return bad("give Servers or ZK")
	case len(cfg.Servers) > 0 && len(cfg.ZK) > 0:
		return bad("give Servers or ZK, not both")
	}
	for _, s := range cfg.Servers {
		if host, port, err := net.SplitHostPort(s); err != nil || host == "" || port == "" {
			return bad("server %q is not host:port", s)
		}
	}
	if cfg.Cluster == "" {
		cfg.Cluster = "default"
	}
	for _, v := range []struct {
		name string
		p    *int
		def  int
		max  int
	}{
		{"MaxBatch", &cfg.MaxBatch, DefaultMaxBatch, 1_000_000},
		{"Attempts", &cfg.Attempts, DefaultAttempts, 100},
		{"MaxInFlight", &cfg.MaxInFlight, DefaultMaxInFlight, 1024},
		{"Prefetch", &cfg.Prefetch, 0, 1_000_000},
	} {
		switch {
		case *v.p < 0 || *v.p > v.max:
			return bad("%s %d: want 0..%d", v.name, *v.p, v.max)
		case *v.p == 0:
			*v.p = v.def
		}
	}
	for _, v := range []struct {
		name string
		p    *time.Duration
		def  time.Duration
	}{
		{"Timeout", &cfg.Timeout, DefaultTimeout}, {"DownFor", &cfg.DownFor, DefaultDownFor},
		{"StallAfter", &cfg.StallAfter, DefaultStallAfter},
		{"PrefetchMaxAge", &cfg.PrefetchMaxAge, DefaultPrefetchMaxAge},
	} {
		switch {
		case *v.p < 0:
			return bad("%s %v is negative", v.name, *v.p)
		case *v.p == 0:
			*v.p = v.def
		}
	}
	return cfg, nil
}

// setNodes replaces the node list, keeping what is known of the nodes
// still there; a node that left and came back starts clean.
func (c *Client) setNodes(peers []coordinator.Peer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := map[string]*nodeState{}
	for _, n := range c.nodes {
		old[n.addr] = n
	}
	nodes := make([]*nodeState, 0, len(peers))
	for _, p := range peers {
		if n := old[p.Addr]; n != nil {
			nodes = append(nodes, n)
		} else {
			nodes = append(nodes, &nodeState{addr: p.Addr})
		}
	}
	c.nodes = nodes
}

// Next returns one new ID.
func (c *Client) Next(ctx context.Context) (int64, error) {
	if c.cfg.Prefetch > 0 {
		id, ok, refill := c.pre.take(c.cfg.PrefetchMaxAge)
		if !ok && refill != nil {
			// A refill is on its way: wait for it rather than send a
			// request of our own beside it.
			select {
			case <-refill:
			case <-ctx.Done():
				c.errs.Add(1)
				return 0, fmt.Errorf("next IDs: %w", ctx.Err())
			}
			id, ok, _ = c.pre.take(c.cfg.PrefetchMaxAge)
		}
		if ok {
			c.ids.Add(1)
			return id, nil
		}
	}
	ids, err := c.NextN(ctx, 1)
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// NextN returns n new IDs (1 ≤ n ≤ MaxCount), increasing within each batch
// of at most MaxBatch.
func (c *Client) NextN(ctx context.Context, n int) ([]int64, error) {
	if n < 1 || n > MaxCount {
		c.errs.Add(1)
		return nil, fmt.Errorf("next %d IDs: %w: want 1..%d", n, ErrRejected, MaxCount)
	}
	out := make([]int64, 0, n)
	for len(out) < n {
		ids, err := c.fetch(ctx, min(n-len(out), c.cfg.MaxBatch))
		if err != nil {
			c.errs.Add(1)
			return nil, err
		}
		out = append(out, ids...)
	}
	return out, nil
}

// fetch waits for n IDs (n ≤ MaxBatch). The caller queues its call; if
// fewer than MaxInFlight batches are out, it also starts one with every
// call queued. A batch's goroutine, once its batch is handed out, takes
// the next one from the queue while callers keep arriving, so under load
// calls pile up while batches are out and each batch carries many; no
// goroutine sits between callers and batches.
func (c *Client) fetch(ctx context.Context, n int) ([]int64, error) {
	cl := callPool.Get().(*call)
	cl.ctx, cl.n = ctx, n
	c.qmu.Lock()
	if c.closed.Load() {
		c.qmu.Unlock()
		cl.release()
		return nil, ErrClosed
	}
	c.queue = append(c.queue, cl)
	c.startLocked()
	c.qmu.Unlock()
	done := ctx.Done()
	if done == nil { // a context that is never cancelled: a plain receive
		r := <-cl.out
		cl.release()
		return r.ids, r.err
	}
	select {
	case r := <-cl.out:
		cl.release()
		return r.ids, r.err
	case <-done:
		// Not released: the batch may still send to cl.out; what arrives
		// is dropped with the call.
		return nil, fmt.Errorf("next IDs: %w", ctx.Err())
	}
}

// callPool recycles calls (and their channels) whose callers got their
// answer; a call whose caller gave up is left to the garbage collector.
var callPool = sync.Pool{New: func() any { return &call{out: make(chan result, 1)} }}

func (cl *call) release() {
	cl.ctx = nil
	callPool.Put(cl)
}

// takeLocked removes the next batch from the queue: calls in order while
// their counts fit MaxBatch, skipping callers that gave up. c.qmu is held.
func (c *Client) takeLocked() ([]*call, int) {
	var batch []*call
	total, i := 0, 0
	for ; i < len(c.queue); i++ {
		cl := c.queue[i]
		if cl.ctx.Err() != nil {
			continue // it has returned already; nothing to fetch for it
		}
		if total+cl.n > c.cfg.MaxBatch {
			break
		}
		batch, total = append(batch, cl), total+cl.n
	}
	rest := copy(c.queue, c.queue[i:])
	clear(c.queue[rest:])
	c.queue = c.queue[:rest]
	return batch, total
}

// run serves batch, then the next batch queued meanwhile, until the queue
// is empty or the client closed; then it frees its in-flight slot. A batch
// out longer than StallAfter (a node that hangs) gives its slot up at once,
// so calls queued behind it start a batch of their own (on the next node)
// instead of waiting for the Timeout; run ends after that batch.
func (c *Client) run(batch []*call, total int) {
	defer c.done.Done()
	for {
		gaveUp := make(chan struct{}) // closed once the stall gave the slot up
		stall := time.AfterFunc(c.cfg.StallAfter, func() {
			defer close(gaveUp)
			c.qmu.Lock()
			defer c.qmu.Unlock()
			c.inFlight--
			c.startLocked()
		})
		c.serve(batch, total)
		if !stall.Stop() {
			<-gaveUp // the slot is no longer ours; wait so Close waits for it
			return
		}
		// Let the callers just handed their IDs queue again before the
		// next batch is taken: otherwise it leaves with whoever happened to
		// be queued and they wait a round trip longer (measured: 16 IDs per
		// request instead of 25 with 64 callers).
		runtime.Gosched()
		c.qmu.Lock()
		if c.closed.Load() {
			batch = nil
		} else {
			batch, total = c.takeLocked()
		}
		if len(batch) == 0 {
			c.inFlight--
			c.qmu.Unlock()
			return
		}
		c.qmu.Unlock()
	}
}

// startLocked starts a batch with the queued calls if a slot is free.
// c.qmu is held.
func (c *Client) startLocked() {
	if c.closed.Load() || c.inFlight >= c.cfg.MaxInFlight {
		return
	}
	if batch, total := c.takeLocked(); len(batch) > 0 {
		c.inFlight++
		c.done.Add(1)
		go c.run(batch, total)
	}
}

// serve fetches total IDs for batch, failing over between nodes, and hands
// them out in order.
func (c *Client) serve(batch []*call, total int) {
	tried := map[string]bool{}
	var failures []string
	for attempt := 0; attempt < c.cfg.Attempts; attempt++ {
		if !anyWaiting(batch) {
			return // every caller gave up: nothing to fetch for
		}
		node := c.pick(tried)
		if node == "" {
			break
		}
		tried[node] = true
		ids, err := c.request(node, total)
		if err == nil {
			c.handOut(batch, ids)
			return
		}
		if errors.Is(err, ErrRejected) {
			for _, cl := range batch {
				cl.out <- result{err: err}
			}
			return
		}
		failures = append(failures, err.Error())
		c.failovers.Add(1)
		if h := c.cfg.Hooks.Failover; h != nil {
			h(node, err)
		}
		c.log.Warn().Err(err).Str("node", node).Msg("snowflaked client: failing over")
	}
	err := c.noNode(failures)
	for _, cl := range batch {
		cl.out <- result{err: err}
	}
}

func anyWaiting(batch []*call) bool {
	for _, cl := range batch {
		if cl.ctx.Err() == nil {
			return true
		}
	}
	return false
}

// handOut gives each caller its slice, in order; a caller that gave up
// gets nothing and its IDs are dropped. The batch is counted first, so
// Stats read by a caller that has its IDs includes them.
func (c *Client) handOut(batch []*call, ids []int64) {
	n := len(ids) // the node answered exactly the batch's total (request checks)
	c.batches.Add(1)
	c.ids.Add(int64(n))
	for _, cl := range batch {
		part := ids[:cl.n:cl.n]
		ids = ids[cl.n:]
		if cl.ctx.Err() == nil {
			cl.out <- result{ids: part}
		}
	}
	if h := c.cfg.Hooks.Batch; h != nil {
		h(n)
	}
}

// pick returns the next healthy node not tried yet ("" for none).
func (c *Client) pick(tried map[string]bool) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	for range len(c.nodes) {
		n := c.nodes[c.next%len(c.nodes)]
		c.next++
		if !tried[n.addr] && !now.Before(n.downUntil) {
			return n.addr
		}
	}
	return ""
}

// markDown takes a node out of rotation for d after err.
func (c *Client) markDown(addr string, d time.Duration, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		if n.addr == addr {
			n.downUntil, n.lastErr = time.Now().Add(d), err
		}
	}
}

// noNode is the error when a batch found no node: each node's last failure.
func (c *Client) noNode(failures []string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var parts []string
	for _, n := range c.nodes {
		switch {
		case n.lastErr != nil:
			parts = append(parts, n.lastErr.Error())
		default:
			parts = append(parts, n.addr+": not tried")
		}
	}
	if len(c.nodes) == 0 {
		parts = append(parts, "no node is known (none in service under alive/, or an empty list)")
	}
	slices.Sort(parts)
	return fmt.Errorf("%w: %s (this batch: %s)", ErrNoNode, strings.Join(parts, "; "), strings.Join(failures, "; "))
}

// Stats returns the counters.
func (c *Client) Stats() Stats {
	return Stats{Requests: c.requests.Load(), Batches: c.batches.Load(), IDs: c.ids.Load(),
		Failovers: c.failovers.Load(), Errors: c.errs.Load()}
}

// Nodes returns the nodes the client knows (static or from alive/).
func (c *Client) Nodes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.addr
	}
	return out
}

// Close stops the client: calls waiting fail with ErrClosed.
func (c *Client) Close() error {
	c.qmu.Lock()
	if c.closed.Swap(true) {
		c.qmu.Unlock()
		return nil
	}
	queued := c.queue
	c.queue = nil
	c.qmu.Unlock()
	for _, cl := range queued {
		cl.out <- result{err: ErrClosed}
	}
	close(c.stop)
	c.done.Wait()
	if c.disc != nil {
		return c.disc.Close()
	}
	return nil
}
