// Package server is snowflaked's HTTP API on fasthttp.
//
// The hot paths (GET /id, GET /api/snowflake/get/{key}) do not allocate:
// routing compares the path bytes with one route table, IDs are formatted with
// strconv.AppendInt into a stack buffer, and batches use pooled buffers.
// Nothing from a fasthttp.RequestCtx is kept after a handler returns.
package server

import (
	"cmp"
	"codeberg.org/snowflaked/snowflaked/internal/endpoint"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/client/wire"
	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/segment"
	"codeberg.org/snowflaked/snowflaked/snowflake"
	"codeberg.org/snowflaked/snowflaked/uuidv7"
)

// IDSource issues IDs; *snowflake.Generator satisfies it.
type IDSource interface {
	Next() (int64, error)
	AppendN(dst []int64, n int) ([]int64, error)
	// NextGene and AppendNGene issue IDs ending in the gene's low
	// Layout().GeneBits bits.
	NextGene(gene uint64) (int64, error)
	AppendNGene(dst []int64, n int, gene uint64) ([]int64, error)
	Layout() snowflake.Layout
}

// Readiness tells whether the node is in service; *health.Guard satisfies it.
type Readiness interface {
	Ready() bool
	Status() health.Status
}

// Observer receives per-request figures, e.g. for metrics. Its methods are
// called on the request path: they must be quick, must not block and should
// not allocate.
type Observer interface {
	// Request is called once per request with the endpoint that answered
	// it (below endpoint.Count) and the response's status code.
	Request(endpoint endpoint.Endpoint, status int)
	// IssuedIDs is called once per successful request that issued IDs,
	// with how many it issued.
	IssuedIDs(n int)
}

// Defaults of Config.
const (
	// DefaultMaxBatch is the default --max-batch.
	DefaultMaxBatch = 10000
	// MaxBatchLimit is the largest MaxBatch New accepts, the largest
	// --max-batch (docs/operations.md): a batch that large is a ~20 MB
	// response.
	MaxBatchLimit = 1_000_000
	// defaultRetryAfter is the default Retry-After of a 503.
	defaultRetryAfter = time.Second
	// defaultReadTimeout is the default time allowed to read a request.
	defaultReadTimeout = 10 * time.Second
	// defaultWriteTimeout is the default time allowed to write a response.
	defaultWriteTimeout = 10 * time.Second
	// defaultIdleTimeout is how long a keep-alive connection may wait for
	// its next request by default.
	defaultIdleTimeout = 60 * time.Second
	// maxRequestBodySize bounds request bodies: the API takes none, and
	// Config.Routes handlers get parameters from the query.
	maxRequestBodySize = 64 << 10
)

// Config configures a Server.
type Config struct {
	IDs   IDSource  // required
	Guard Readiness // required
	Clock clock.Clock
	// OnIDError is called (must be quick, non-blocking) when the generator
	// refuses an ID, e.g. with a *snowflake.RollbackError, so the node can
	// leave service. May be nil.
	OnIDError func(error)
	// ClockInfo returns the JSON-marshalable body of GET /clock. May be nil.
	ClockInfo  func() any
	MaxBatch   int           // 0 means DefaultMaxBatch
	RetryAfter time.Duration // Retry-After on 503; 0 means 1s
	Log        zerolog.Logger
	// Routes are extra handlers by exact path (e.g. /metrics, /status,
	// /debug/chaos/clock); each handler checks its own method.
	Routes map[string]fasthttp.RequestHandler
	// Segments serves segment mode (dense IDs per tag); nil: the node runs
	// without ZooKeeper and the segment endpoints answer 404 segments_off.
	Segments SegmentSource
	// ClusterNodes returns the nodes in service that GET /cluster/nodes
	// lists, in worker-ID order; local is the address the request came in
	// on, for a node that has no address of its own to give. May be nil:
	// the list is empty.
	ClusterNodes func(local net.Addr) []wire.ClusterNode
	// APITokens, when not nil, are the node-wide tokens that the snowflake
	// endpoints (/id, /ids, /uuid, /uuids, Leaf's /api/snowflake/get)
	// require as Authorization: Bearer (--api-tokens-file): 401
	// token_required without one, 403 token_invalid with another.
	APITokens *segment.TokenSet
	// Observer, when not nil, is told about every request and issued batch.
	Observer Observer
	// Authorize, when not nil, is asked first about every request (before
	// any route, extra ones included): a non-nil error answers 403
	// client_not_allowed with the error as message (mutual TLS
	// allow-lists).
	Authorize func(ctx *fasthttp.RequestCtx) error
	// ReadTimeout, WriteTimeout and IdleTimeout of the fasthttp server; 0
	// means defaultReadTimeout, defaultWriteTimeout, defaultIdleTimeout.
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
}

// Server serves the HTTP API.
type Server struct {
	cfg        Config
	srv        *fasthttp.Server
	handler    fasthttp.RequestHandler
	log        zerolog.Logger // sampled: for per-request events
	obs        Observer
	maxBatch   int
	retryAfter []byte // Retry-After header value in seconds
	batches    sync.Pool
	perTick    int           // IDs one tick holds: the /ids chunk between readiness checks
	batchBound time.Duration // the longest an /ids batch may take
	conns      connTracker
	serving    atomic.Pointer[serving] // the listener Serve accepts on, once it does
	uuids      uuidv7.Codec            // the layout's UUIDv7 codec
	uuidErr    error                   // why the layout cannot make UUIDs (nil: it can)
	idBits     uint                    // the layout's time, worker and sequence bits: the size of its IDs
}

// batchBound is how long an /ids batch may take beyond two ticks of the
// layout: a batch that spans many ticks (a coarse --time-unit, a large
// --max-batch, few sequence bits) fails with 503 batch_timeout past
// batchBound + 2 ticks instead of holding its connection.
const batchBound = time.Second

// New checks cfg and returns a server.
func New(cfg Config) (*Server, error) {
	if cfg.IDs == nil || cfg.Guard == nil || cfg.Clock == nil {
		return nil, errors.New("new server: IDs, Guard and Clock are required")
	}
	if cfg.MaxBatch < 0 || cfg.MaxBatch > MaxBatchLimit {
		return nil, fmt.Errorf("new server: max batch %d is outside 1..%d (0 means %d)", cfg.MaxBatch, MaxBatchLimit, DefaultMaxBatch)
	}
	if cfg.RetryAfter < 0 {
		return nil, fmt.Errorf("new server: retry-after %s is negative", cfg.RetryAfter)
	}
	if cfg.ReadTimeout < 0 || cfg.WriteTimeout < 0 || cfg.IdleTimeout < 0 {
		return nil, fmt.Errorf("new server: negative timeout (read %s, write %s, idle %s)", cfg.ReadTimeout, cfg.WriteTimeout, cfg.IdleTimeout)
	}
	for path, h := range cfg.Routes {
		if h == nil {
			return nil, fmt.Errorf("new server: route %q has no handler", path)
		}
		if isBuiltin(path) {
			return nil, fmt.Errorf("new server: route %q collides with a built-in endpoint", path)
		}
	}
	cfg.Routes = maps.Clone(cfg.Routes) // the caller may change its map later: requests read ours
	s := &Server{cfg: cfg, obs: cfg.Observer, maxBatch: cfg.MaxBatch, conns: connTracker{conns: map[*trackedConn]struct{}{}}}
	if s.obs == nil {
		s.obs = nopObserver{}
	}
	if s.maxBatch == 0 {
		s.maxBatch = DefaultMaxBatch
	}
	ra := cfg.RetryAfter
	if ra == 0 {
		ra = defaultRetryAfter
	}
	secs := int64((ra + time.Second - 1) / time.Second) // round up: never tell a client to retry early
	s.retryAfter = strconv.AppendInt(nil, max(secs, 1), 10)
	// Per-request events go through a sampler: a burst, then 1 in 100.
	s.log = cfg.Log.Sample(&zerolog.BurstSampler{Burst: 10, Period: time.Second, NextSampler: &zerolog.BasicSampler{N: 100}})
	s.batches.New = func() any { return &batch{pool: &s.batches} }
	l := cfg.IDs.Layout()
	s.perTick = int(min(l.PerTick(), int64(MaxBatchLimit)))
	s.batchBound = batchBound + 2*l.Unit
	s.uuids, s.uuidErr = uuidv7.NewCodec(l)
	s.idBits = l.TimeBits + l.WorkerBits + l.SequenceBits
	s.handler = s.handle
	s.srv = &fasthttp.Server{
		Handler:            s.handler,
		ErrorHandler:       s.handleParseError,
		Logger:             newLibLog(cfg.Log, time.Now),
		Name:               "snowflaked",
		ReadTimeout:        cmp.Or(cfg.ReadTimeout, defaultReadTimeout),
		WriteTimeout:       cmp.Or(cfg.WriteTimeout, defaultWriteTimeout),
		IdleTimeout:        cmp.Or(cfg.IdleTimeout, defaultIdleTimeout),
		MaxRequestBodySize: maxRequestBodySize,
		ReduceMemoryUsage:  false, // keep per-connection buffers: fewer allocations under load
		CloseOnShutdown:    true,  // tell keep-alive clients to go elsewhere while draining
		// The Date header is cached by fasthttp once a second; the Server
		// header is "snowflaked": both are cheap and useful, so keep them.
	}
	return s, nil
}

// Handler returns the request router. It is safe for concurrent use. HEAD
// is answered like GET without the body (fasthttp drops it), so a HEAD of
// /id or /ids issues, and discards, IDs. The /ids body is a pooled buffer
// that fasthttp hands back (via the request's user values) after writing
// it; callers outside fasthttp's server should reset the request's user
// values after each call to reuse it.
func (s *Server) Handler() fasthttp.RequestHandler { return s.handler }

// serving is what Shutdown needs of a running Serve.
type serving struct {
	ln   *onceCloseListener
	done chan struct{} // closed when Serve returns
}

// Serve serves on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	sv := &serving{ln: &onceCloseListener{Listener: ln}, done: make(chan struct{})}
	defer close(sv.done)
	s.serving.Store(sv)
	return s.srv.Serve(trackingListener{Listener: sv.ln, t: &s.conns})
}

// Shutdown stops accepting connections and waits (up to ctx) for in-flight
// requests to finish. Connections that never sent a byte (a client's spare
// connection) hold no request: they are closed at once instead of holding
// the drain until fasthttp's read timeout.
func (s *Server) Shutdown(ctx context.Context) error {
	// The listener first, and Serve's return: fasthttp's drain counts a
	// Serve still waiting in accept as an open connection and polls every
	// 100 ms while one is open, so a drain begun before Serve returned
	// would wait 100 ms for nothing.
	if sv := s.serving.Load(); sv != nil {
		_ = sv.ln.Close()
		select {
		case <-sv.done:
		case <-ctx.Done():
		}
	}
	done := make(chan error, 1)
	go func() { done <- s.srv.ShutdownWithContext(ctx) }()
	tick := clock.NewTicker(ctx, 20*time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done: // the drain's end wins over a tick (select picks at random)
			return err
		default:
		}
		select {
		case err := <-done:
			return err
		case <-tick.C:
			s.conns.closeUnstarted()
		}
	}
}

type nopObserver struct{}

func (nopObserver) Request(endpoint.Endpoint, int) {}
func (nopObserver) IssuedIDs(int)                  {}
