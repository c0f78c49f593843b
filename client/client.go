// Package client is the Go client of snowflaked for application fleets.
//
// It finds the nodes through a Discovery (a static list; Bootstrap, which
// asks any node for the cluster's members; or the subpackage zkdiscovery,
// which follows ZooKeeper's alive/ znodes) and asks them for IDs over
// keep-alive HTTP/1.1 connections of its own (through the proxies of the
// environment, HTTP_PROXY, HTTPS_PROXY and NO_PROXY, as net/http picks
// them; an answer with a Content-Length or chunked):
//
//   - Next and NextN: snowflake IDs, from GET /ids?count=N;
//   - NextSegment and NextSegmentN: the dense IDs of a tag, from
//     GET /segment/{tag}?count=N;
//   - NextGene and NextGeneN: snowflake IDs that carry a gene, from
//     GET /ids?gene=G&count=N;
//   - NextUUID and NextUUIDN: UUIDv7s, from GET /uuids?count=N;
//   - NextSegmentText and NextSegmentEncoded: a tag's IDs as the node
//     writes them (or in a fixed-width encoding), as strings;
//   - Bounds: the smallest and largest ID and UUID of a time range, from
//     GET /bounds.
//
// EncodeID, DecodeID, EncodeUUID and DecodeUUID write and read IDs and
// UUIDs in the fixed-width encodings the nodes answer with ?format=
// (base62, base58, base36, Crockford's base32), without a request; the
// strings sort as the numbers do.
//
// A call that returns several has the name of the call that returns one,
// and N.
//
// A call alone does its request itself, on the caller's goroutine: nothing
// is added to a plain GET but the parsing. Calls that arrive while a
// request is out are merged into the next one (one round trip for many
// callers: a node issues up to 4,096,000 IDs/s, far more than it serves
// requests), up to MaxBatch IDs a request and MaxInFlight requests at once.
//
// Each client talks to a subset of the nodes, Subset of them (6 by
// default), chosen by rendezvous hashing of the client's random ID and the
// nodes' addresses: over many clients every node holds about
// clients·Subset/nodes connections instead of one per client, and a node
// that leaves moves only the clients that had it, each to the node it
// ranked next. Only when every node of its subset is down or tried does a
// batch go beyond it, in the client's ranking.
//
// Nodes that fail are routed around: a connection error, a timeout, a 5xx
// (a node out of service for its clock, say) or a 404 that is not "unknown
// tag" (an address that is no longer a snowflaked node) marks the node down
// for that kind of ID (for its Retry-After, or DownFor) and the batch moves
// to another node, within the callers' deadlines and Attempts nodes. A 503
// batch_timeout (the batch is too large for the node's per-tick capacity)
// moves the batch without marking the node down. Any other 4xx is the
// caller's mistake: returned as ErrRejected, never retried.
//
// Errors to branch on: a *RejectedError (errors.Is(err, ErrRejected); its
// Code is the API's error code), a *NoNodeError when no node could serve
// the call (errors.Is(err, ErrNoNode); its causes are each node's failure),
// ErrClosed, and the context's own error (context.Canceled or
// context.DeadlineExceeded) when the caller's context ended first, on every
// call and whatever the nodes did meanwhile.
//
// Guarantees: no ID is handed out twice (an ID fetched for a caller that
// gave up is dropped, never kept); the IDs of one call increase (a call
// larger than MaxBatch, served in several batches, is sorted); IDs of
// different calls are unique, not ordered. Optional prefetch (Next only)
// keeps IDs fetched ahead for at most PrefetchMaxAge, so the time inside an
// ID lags the call by at most that; with it, one goroutine's successive
// Next calls are unique but not always increasing.
//
// The package builds on the standard library alone (and client/wire, the
// contract shared with the nodes): none of the server, no ZooKeeper client;
// it logs through log/slog.
package client

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"codeberg.org/snowflaked/snowflaked/client/internal/rendezvous"
	"codeberg.org/snowflaked/snowflaked/client/wire"
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
	// DefaultSubset is how many nodes a client talks to (Config.Subset).
	DefaultSubset = 6
	// MaxSubset bounds Config.Subset: a Subset at least the cluster's
	// size talks to every node.
	MaxSubset = 4096
	// MaxCount bounds the n of NextN and NextSegmentN.
	MaxCount = 1 << 20
	// MaxTagLen bounds a segment tag, as the nodes do.
	MaxTagLen = 128
)

// Config configures a Client: either Servers or Discovery. The zero value
// of every other field means its default.
type Config struct {
	// Servers is a static list of nodes, "host:port" each (the same as
	// Discovery: Static(Servers)). Nil or empty: Discovery gives the nodes.
	Servers []string
	// Discovery finds the nodes instead: a Bootstrap (ask any node for the
	// cluster's members), a zkdiscovery.Discovery (follow ZooKeeper's
	// alive/ znodes), or one of your own. The client does not close it.
	// Nil: Servers gives the nodes (exactly one of the two is set).
	Discovery Discovery
	// MaxBatch bounds the IDs one request asks for, 0..1,000,000 (0:
	// DefaultMaxBatch, 1000). A batch asks for exactly what the callers
	// waiting want, never more. A node whose --max-batch is smaller refuses
	// a larger count naming its limit; the client then asks for at most
	// the smallest limit a node named, in several requests, for the rest of
	// its life (a Warn line when it learns one).
	MaxBatch int
	// Timeout bounds one request to one node (0: DefaultTimeout, 2s).
	Timeout time.Duration
	// Attempts is how many nodes one batch tries before it fails, 0..100
	// (0: DefaultAttempts, 3).
	Attempts int
	// MaxInFlight bounds the requests out at once for one kind of ID,
	// 0..1024 (0: DefaultMaxInFlight, 1). Fewer in flight make bigger
	// batches: callers pile up while a request is out. A request out longer
	// than StallAfter stops counting (see StallAfter).
	MaxInFlight int
	// StallAfter (0: DefaultStallAfter, 50ms): a request out longer than
	// this (a node that hangs, a lost packet) gives its in-flight slot up,
	// so callers that arrive meanwhile get a request of their own on the
	// next node; the stalled request's callers still wait for it, up to
	// Timeout per node.
	StallAfter time.Duration
	// Subset is how many nodes the client talks to, 0..MaxSubset (0:
	// DefaultSubset, 6): the first Subset nodes of the client's rendezvous
	// ranking of the Discovery's list, by address. Calls go round-robin
	// over the subset (in the list's order); only when every node of the
	// subset is down or tried does a batch go on to the next nodes of the
	// ranking. A node that leaves the list is replaced by the next node of
	// the ranking, and only in the clients that had it. 3..8 suits most
	// fleets: with C clients and n nodes each node holds about C·Subset/n
	// clients' connections, and a client rides out Subset-1 nodes down
	// before it goes beyond its subset. At least the cluster's size (or
	// MaxSubset): every node, as before subsets.
	Subset int
	// SubsetID keys the client's ranking (0: a random ID drawn once per
	// process). Clients with the same ID talk to the same nodes: leave it
	// 0 but in tests.
	SubsetID uint64
	// DownFor is how long a node that failed without a Retry-After (a
	// connection error, a timeout) gets no traffic (0: DefaultDownFor, 1s).
	DownFor time.Duration
	// Prefetch keeps up to this many snowflake IDs fetched ahead for Next,
	// 0..10,000,000 (0: off). Dense IDs are never prefetched: what a client
	// holds when it exits is lost to the tag's density.
	Prefetch int
	// PrefetchMaxAge drops prefetched IDs older than it (0:
	// DefaultPrefetchMaxAge, 1s), so the time inside an ID lags the call
	// by at most that.
	PrefetchMaxAge time.Duration
	// Tokens holds, by tag, the token NextSegment sends for tags created
	// with --require-token (Authorization: Bearer); tags not in it go
	// without one. A node refuses a missing or wrong token with
	// ErrRejected (401 token_required, 403 token_invalid), the same on
	// every node. Nil or empty: no tag gets a token.
	Tokens map[string]string
	// APIToken is sent with every request for snowflake IDs and UUIDs
	// (Authorization: Bearer), for nodes run with --api-tokens-file;
	// empty sends none.
	APIToken string
	// Hooks receive the client's events; the zero value has none (each nil
	// hook is skipped).
	Hooks Hooks
	// Log receives a line per failover and per failed prefetch, at level
	// Warn; nil discards everything.
	Log *slog.Logger
	// TLS, when not nil, makes every connection to a node HTTPS with it
	// (nodes serving --tls-cert): RootCAs verifies the nodes, and
	// Certificates or GetClientCertificate is the client certificate for
	// nodes that require one (--tls-client-ca). A ServerName left empty is
	// each node's host. nil: plain HTTP.
	TLS *tls.Config
}

// Hooks are called on the client's and the callers' goroutines: they must
// be quick and must not block. Wire them to a metrics library. A nil hook is
// skipped. Each takes one event struct, so that later fields do not change
// the hook's type.
type Hooks struct {
	// Request is called after each HTTP request to a node.
	Request func(RequestEvent)
	// Batch is called when a batch of IDs was handed out (to the callers
	// of a request, or to the prefetch buffer).
	Batch func(BatchEvent)
	// Failover is called when a batch leaves a node after a failure, for
	// the next node.
	Failover func(FailoverEvent)
}

// RequestEvent is one HTTP request to one node (Hooks.Request).
type RequestEvent struct {
	// Node is the node asked, "host:port".
	Node string
	// Count is how many IDs (or UUIDs) the request asked for.
	Count int
	// Status is the answer's HTTP status, 0 when no answer came (a
	// connection error, a timeout).
	Status int
	// Err is the request's failure, nil when it was served.
	Err error
	// Duration is the time from the start of the request to its end.
	Duration time.Duration
}

// BatchEvent is a batch of IDs handed out (Hooks.Batch).
type BatchEvent struct {
	// IDs is how many IDs (or UUIDs) the batch handed out.
	IDs int
}

// FailoverEvent is a batch leaving a node (Hooks.Failover).
type FailoverEvent struct {
	// Node is the node the batch left, "host:port".
	Node string
	// Err is the node's failure that made the batch leave.
	Err error
}

// Stats are the client's counters since New.
type Stats struct {
	Requests  int64 // HTTP requests made
	Batches   int64 // batches handed out
	IDs       int64 // IDs handed out (snowflake and dense)
	Failovers int64 // batches moved to another node
	Errors    int64 // calls that returned an error
}

// transport makes a Client's requests to the nodes and owns their
// connections.
type transport interface {
	// roundTrip sends GET path to addr with the header lines in header
	// (each ending in CRLF; "" for none) and hands the answer to use; the
	// body may be at most maxBody bytes when the status is 200.
	roundTrip(addr, path, header string, deadline time.Time, maxBody int, use func(answer) error) error
	// keepOnly closes the idle connections to nodes not in addrs.
	keepOnly(addrs []string)
	// close closes every connection, idle or in use, and refuses new ones.
	close()
	// conns is the number of open connections.
	conns() int
}

// Client issues IDs from a snowflaked cluster. It is safe for concurrent
// use. Close it when done.
type Client struct {
	cfg  Config
	log  *slog.Logger
	pool transport
	stop chan struct{}
	done sync.WaitGroup // batch and prefetch goroutines

	ids *batcher // snowflake IDs

	segMu sync.Mutex
	segs  map[string]*batcher // dense IDs, per tag

	mu    sync.Mutex
	nodes []*nodeState // the Discovery's list, in its order
	sub   []*nodeState // the subset, in the list's order
	spill []*nodeState // the other nodes, in the client's ranking
	next  int          // round-robin cursor over sub

	pre *prefetch

	// nodeMax is the smallest count a node said it accepts, when below
	// MaxBatch (0: none said so); see serveClamped.
	nodeMax atomic.Int64

	requests, batches, handed, failovers, errs atomic.Int64
	closed                                     atomic.Bool
}

// New checks cfg and starts the client with the nodes its Discovery gives
// now, following the changes until Close. ctx is not used after New
// returns.
func New(ctx context.Context, cfg Config) (*Client, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Client{
		cfg: cfg, log: cfg.Log,
		stop: make(chan struct{}),
		pool: newPool(cfg.MaxInFlight+prefetchDepth+2, cfg.TLS),
		segs: map[string]*batcher{},
	}
	c.ids = newBatcher(c, endpoint{svc: svcIDs, path: wire.PathIDs + "?" + wire.ParamCount + "=", what: "IDs", header: bearer(cfg.APIToken)})
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("new client: %w", err)
	}
	nodes, changed := cfg.Discovery.Nodes()
	c.setNodes(nodes)
	if changed != nil {
		c.done.Add(1)
		go c.follow(changed)
	}
	if cfg.Prefetch > 0 {
		c.pre = newPrefetch(c)
	}
	return c, nil
}

func (cfg Config) withDefaults() (Config, error) {
	bad := func(format string, a ...any) (Config, error) {
		return Config{}, fmt.Errorf("new client: %w: %s", ErrInvalidConfig, fmt.Sprintf(format, a...))
	}
	switch {
	case len(cfg.Servers) == 0 && cfg.Discovery == nil:
		return bad("give Servers or Discovery")
	case len(cfg.Servers) > 0 && cfg.Discovery != nil:
		return bad("give Servers or Discovery, not both")
	}
	for _, s := range cfg.Servers {
		if wire.CheckHostPort(s) != nil {
			return bad("server %q is not host:port", s)
		}
	}
	for tag, token := range cfg.Tokens {
		if !validToken(token) {
			return bad("the token of tag %q: want 1..512 printable ASCII characters without spaces", tag)
		}
	}
	if cfg.APIToken != "" && !validToken(cfg.APIToken) {
		return bad("APIToken: want 1..512 printable ASCII characters without spaces")
	}
	cfg.Tokens = maps.Clone(cfg.Tokens)
	if cfg.Discovery == nil {
		cfg.Discovery = Static(slices.Clone(cfg.Servers))
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.SubsetID == 0 {
		cfg.SubsetID = rendezvous.ProcessID()
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
		{"Prefetch", &cfg.Prefetch, 0, 10_000_000},
		{"Subset", &cfg.Subset, DefaultSubset, MaxSubset},
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

// Next returns one new snowflake ID.
func (c *Client) Next(ctx context.Context) (int64, error) {
	if c.closed.Load() {
		c.errs.Add(1)
		return 0, ErrClosed
	}
	if c.pre != nil {
		if id, ok := c.pre.take(ctx); ok {
			c.handed.Add(1)
			return id, nil
		}
	}
	ids, err := c.ids.get(ctx, 1)
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// NextN returns n new snowflake IDs (1 ≤ n ≤ MaxCount), increasing.
func (c *Client) NextN(ctx context.Context, n int) ([]int64, error) {
	return c.ids.get(ctx, n)
}

// NextGene returns one new snowflake ID that ends in gene's low gene bits:
// id % 2^K == gene % 2^K on a cluster run with --gene-bits K (gene is
// typically a user ID, so that the ID can be found in the user's shard).
// A cluster without gene bits answers gene_off: ErrRejected. Such calls
// are not merged with others (each gene is its own request), nor
// prefetched.
func (c *Client) NextGene(ctx context.Context, gene uint64) (int64, error) {
	ids, err := c.NextGeneN(ctx, gene, 1)
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// NextGeneN returns n new snowflake IDs (1 ≤ n ≤ MaxBatch), increasing,
// each ending in gene's low gene bits (see NextGene).
func (c *Client) NextGeneN(ctx context.Context, gene uint64, n int) ([]int64, error) {
	g := strconv.FormatUint(gene, 10)
	var bad error
	switch {
	case gene > math.MaxInt64:
		bad = &RejectedError{Code: wire.CodeInvalidGene, Message: fmt.Sprintf("next %d IDs with gene %d: want a gene up to 2^63-1", n, gene)}
	case n < 1 || n > c.cfg.MaxBatch:
		bad = &RejectedError{Code: wire.CodeInvalidCount, Message: fmt.Sprintf("next %d IDs with gene %d: want 1..%d IDs", n, gene, c.cfg.MaxBatch)}
	}
	return c.direct(ctx, &endpoint{svc: svcIDs, path: wire.PathIDs + "?" + wire.ParamGene + "=" + g + "&" + wire.ParamCount + "=", what: "IDs with gene " + g, header: bearer(c.cfg.APIToken)}, n, bad)
}

// direct makes the request for n of ep's IDs with the usual failover,
// outside the batchers: for calls that are never merged with others
// (NextGeneN, NextUUIDN). bad, when set, is the caller's argument error.
func (c *Client) direct(ctx context.Context, ep *endpoint, n int, bad error) ([]int64, error) {
	ids, err := c.call(ctx, ep, n, bad)
	if err == nil {
		c.counted(n)
	}
	return ids, err
}

// call is direct without counting the IDs: for calls that return no IDs
// (Bounds) or count what they return themselves. Its endpoint's text,
// when set, takes the answer.
func (c *Client) call(ctx context.Context, ep *endpoint, n int, bad error) ([]int64, error) {
	err := bad
	switch {
	case c.closed.Load():
		err = ErrClosed
	case err != nil:
	case ctx.Err() != nil:
		err = fmt.Errorf("next %s: %w", ep.what, ctx.Err())
	default:
		deadline, _ := ctx.Deadline()
		var ids []int64
		ids, err = c.serveClamped(ep, n, deadline, false, func() bool { return ctx.Err() == nil })
		if err = callerErr(ctx, ep.what, err); err == nil {
			return ids, nil
		}
	}
	c.errs.Add(1)
	return nil, err
}

// NextSegment returns the next dense ID of tag (a tag created with
// snowflakectl segment create). An unknown tag is ErrRejected.
func (c *Client) NextSegment(ctx context.Context, tag string) (int64, error) {
	ids, err := c.NextSegmentN(ctx, tag, 1)
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// NextSegmentN returns n dense IDs of tag (1 ≤ n ≤ MaxCount): increasing
// for a plain tag; an opaque tag's numbers are distinct and in no order.
func (c *Client) NextSegmentN(ctx context.Context, tag string, n int) ([]int64, error) {
	b, err := c.segment(tag)
	if err != nil {
		c.errs.Add(1)
		return nil, err
	}
	return b.get(ctx, n)
}

// segment is the batcher of tag's dense IDs.
func (c *Client) segment(tag string) (*batcher, error) {
	c.segMu.Lock()
	defer c.segMu.Unlock()
	if c.closed.Load() {
		return nil, ErrClosed // Close has closed the batchers it knows
	}
	if b := c.segs[tag]; b != nil {
		return b, nil
	}
	if err := checkTag(tag); err != nil {
		return nil, err
	}
	ep := endpoint{svc: svcSegments, path: wire.SegmentPath(tag) + "?" + wire.ParamCount + "=", what: "dense IDs of " + tag, unordered: true}
	ep.header = bearer(c.cfg.Tokens[tag])
	ep.tagMax = new(atomic.Int64)
	b := newBatcher(c, ep)
	c.segs[tag] = b
	return b, nil
}

// bearer is the header line that sends token ("" for none).
func bearer(token string) string {
	if token == "" {
		return ""
	}
	return "Authorization: Bearer " + token + "\r\n"
}

// validToken reports whether a tag token can go in a header line as is.
func validToken(t string) bool {
	if t == "" || len(t) > 512 {
		return false
	}
	for i := range len(t) {
		if t[i] < 0x21 || t[i] > 0x7e {
			return false
		}
	}
	return true
}

// checkTag applies the nodes' rule for a tag: 1..MaxTagLen bytes of
// printable UTF-8 without '/', space, '?', '#', '%' or '\', not "." or "..".
// The tag goes into the URL path as is.
func checkTag(tag string) error {
	bad := func(why string) error {
		return &RejectedError{Code: wire.CodeInvalidTag, Message: fmt.Sprintf("tag %q: %s", tag, why)}
	}
	switch {
	case tag == "":
		return bad("empty")
	case len(tag) > MaxTagLen:
		return bad(fmt.Sprintf("%d bytes, at most %d", len(tag), MaxTagLen))
	case tag == "." || tag == "..":
		return bad("not a tag name")
	case strings.ContainsAny(tag, "/ ?#%\\"):
		return bad("contains one of / space ? # % \\")
	}
	for _, r := range tag {
		if r < 0x21 || r == 0x7f || r == 0xfffd {
			return bad("contains a control character or is not UTF-8")
		}
	}
	return nil
}

// nodeState is what the client knows of one node.
type nodeState struct {
	addr      string
	downUntil [numServices]time.Time
	lastErr   [numServices]error
	inSubset  bool // among the nodes the client talks to
}

// setNodes replaces the node list (a node listed twice counts once),
// keeping what is known of the nodes still there (a node that left and
// came back starts clean), and picks the subset anew: the first
// Config.Subset of the client's ranking. Idle connections to nodes outside
// the subset are closed.
func (c *Client) setNodes(addrs []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := map[string]*nodeState{}
	for _, n := range c.nodes {
		old[n.addr] = n
	}
	nodes := make([]*nodeState, 0, len(addrs))
	byAddr := map[string]*nodeState{}
	for _, a := range addrs {
		if byAddr[a] != nil {
			continue
		}
		n := old[a]
		if n == nil {
			n = &nodeState{addr: a}
		}
		nodes = append(nodes, n)
		byAddr[a] = n
	}
	keys := make([]string, len(nodes))
	for i, n := range nodes {
		keys[i] = n.addr
	}
	ranked := rendezvous.Rank(c.cfg.SubsetID, keys)
	k := min(c.cfg.Subset, len(ranked))
	for i, r := range ranked {
		nodes[r].inSubset = i < k
	}
	c.nodes, c.sub, c.spill = nodes, make([]*nodeState, 0, k), make([]*nodeState, 0, len(nodes)-k)
	var subAddrs []string
	for _, n := range nodes {
		if n.inSubset {
			c.sub = append(c.sub, n)
			subAddrs = append(subAddrs, n.addr)
		}
	}
	for _, r := range ranked[k:] {
		c.spill = append(c.spill, nodes[r])
	}
	c.pool.keepOnly(subAddrs)
}

// pick returns the next node up for svc not tried yet ("" for none): the
// subset's, round-robin; when none of the subset is, the first of the
// other nodes in the client's ranking.
func (c *Client) pick(svc service, tried []string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	usable := func(n *nodeState) bool {
		return !slices.Contains(tried, n.addr) && !now.Before(n.downUntil[svc])
	}
	for range len(c.sub) {
		n := c.sub[c.next%len(c.sub)]
		c.next++
		if usable(n) {
			return n.addr
		}
	}
	for _, n := range c.spill {
		if usable(n) {
			return n.addr
		}
	}
	return ""
}

// markDown takes a node out of rotation for svc for d after err.
func (c *Client) markDown(addr string, svc service, d time.Duration, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		if n.addr == addr {
			n.downUntil[svc], n.lastErr[svc] = time.Now().Add(d), err
		}
	}
}

// noNode is the error when a batch of ep found no node: this batch's
// failures (on the nodes tried), then each other node's last failure for
// its kind of ID; the subset's nodes never tried are NotTried (the nodes
// beyond it are not named).
func (c *Client) noNode(ep *endpoint, tried []string, failures []error) *NoNodeError {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := &NoNodeError{What: ep.what, Causes: failures}
	for _, n := range c.nodes {
		switch last := n.lastErr[ep.svc]; {
		case slices.Contains(tried, n.addr):
		case last == nil && !n.inSubset:
		case last == nil:
			e.NotTried = append(e.NotTried, n.addr)
		case !slices.Contains(failures, last):
			e.Causes = append(e.Causes, last)
		}
	}
	return e
}

// Stats returns the counters.
func (c *Client) Stats() Stats {
	return Stats{Requests: c.requests.Load(), Batches: c.batches.Load(), IDs: c.handed.Load(),
		Failovers: c.failovers.Load(), Errors: c.errs.Load()}
}

// Nodes returns the nodes the client knows: its Discovery's latest list.
func (c *Client) Nodes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return addrsOf(c.nodes)
}

// Subset returns the nodes the client talks to, in the order of Nodes:
// the first Config.Subset of its ranking of Nodes (all of them when there
// are no more).
func (c *Client) Subset() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return addrsOf(c.sub)
}

// addrsOf returns the nodes' addresses.
func addrsOf(nodes []*nodeState) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.addr
	}
	return out
}

// Close stops the client: calls waiting or in flight fail with ErrClosed,
// every connection is closed, and when Close returns no goroutine of the
// client is left.
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.ids.close()
	c.segMu.Lock()
	for _, b := range c.segs {
		b.close()
	}
	c.segMu.Unlock()
	close(c.stop)
	c.pool.close() // requests in flight fail at once
	c.done.Wait()
	return nil
}
