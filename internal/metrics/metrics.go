// Package metrics exposes snowflaked's figures in the Prometheus text format
// (GET /metrics).
//
// Two kinds of figures:
//
//   - Counted on the request path: requests per endpoint and status class,
//     and issued IDs. *Metrics is the server's observer; every counter is
//     created up front and found by a fixed index, so an observation is one
//     atomic add and never allocates.
//   - Read at scrape time from one nodestate.Snapshot of the node
//     (build, generator, guard, watcher, NTP and peer checks, ZooKeeper
//     coordinator, fence, segments), taken once per scrape. Nothing is
//     copied or polled in between.
//
// With Config.ProcessMetrics the Go runtime families (go_*, from
// runtime/metrics and the runtime) and the process families (process_*,
// from /proc on Linux) follow, named as Prometheus's Go collectors name
// them. Every family has HELP and TYPE lines: the whole exposition passes
// promtool check metrics.
//
// Clock rollbacks beyond the tolerance are reported by the node through
// ObserveRollback, which merges the many reports of one rollback (every
// refused request, the watcher) into one event.
package metrics

import (
	"codeberg.org/snowflaked/snowflaked/internal/endpoint"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/internal/nodestate"
)

// errBadConfig is wrapped by every error New returns for an invalid Config.
var errBadConfig = errors.New("metrics: invalid configuration")

// Config configures New.
type Config struct {
	// Snapshot returns the node's state (required). A scrape calls it
	// once and reads every figure it writes from what it returned; the
	// sections it leaves nil leave their families out (e.g. no ZooKeeper
	// figures in standalone mode).
	Snapshot func() nodestate.Snapshot
	// RollbackTolerance is the generator's --rollback-tolerance. The
	// generator does not say how far back the clock was when it waited
	// within tolerance, only that it did: such waits are counted in the
	// size class that holds the tolerance (le_5ms for the default 5ms).
	RollbackTolerance time.Duration
	// RollbackPolicy is the node's --rollback-policy ("leave" or
	// "borrow"), exported as snowflaked_rollback_policy; "" leaves that
	// family out.
	RollbackPolicy string
	// ProcessMetrics adds the Go runtime and process families (go_*,
	// process_*) to every scrape.
	ProcessMetrics bool
}

// Size classes of snowflaked_clock_rollbacks_total. Each rollback is counted
// in exactly one class (they are not cumulative like histogram buckets).
const (
	sizeLE5ms   = "le_5ms"   // at most 5ms
	sizeLE100ms = "le_100ms" // over 5ms, at most 100ms
	sizeLE1s    = "le_1s"    // over 100ms, at most 1s
	sizeGT1s    = "gt_1s"    // over 1s
)

// rollbackSizes lists the size classes in increasing order.
var rollbackSizes = []string{sizeLE5ms, sizeLE100ms, sizeLE1s, sizeGT1s}

// rollbackLimits are the inclusive upper bounds of all but the last class.
var rollbackLimits = [...]time.Duration{5 * time.Millisecond, 100 * time.Millisecond, time.Second}

// sizeIndex returns the index in rollbackSizes of a rollback of size d.
func sizeIndex(d time.Duration) int {
	for i, limit := range rollbackLimits {
		if d <= limit {
			return i
		}
	}
	return len(rollbackLimits)
}

// rollbackMergeWindow: ObserveRollback counts a report as a new rollback
// only if the wall time the clock must reach again to be past the last
// issued ID (now + behind) is more than this after that of the rollback
// counted last. Every refused request of one rollback, and the watcher's
// report of the same step, point at about the same instant, so they count
// once; two rollbacks whose catch-up points are within this window count
// once too.
const rollbackMergeWindow = time.Second

// Status classes of the code label of snowflaked_requests_total.
var statusClasses = [...]string{"1xx", "2xx", "3xx", "4xx", "5xx", "other"}

const numClasses = len(statusClasses)

// classIndex maps a status code to its index in statusClasses.
func classIndex(status int) int {
	if status >= 100 && status <= 599 {
		return status/100 - 1
	}
	return numClasses - 1
}

// Metrics holds the counters and reads the node's snapshot at scrape time.
// It is safe for concurrent use. Create it with New.
type Metrics struct {
	snapshot  func() nodestate.Snapshot
	tolerance int    // size class of the generator's within-tolerance waits
	process   bool   // Config.ProcessMetrics
	policy    string // Config.RollbackPolicy
	revision  string // the label of snowflaked_build_info, read once

	ids      atomic.Uint64
	requests [int(endpoint.Count) * numClasses]atomic.Uint64

	rollbacks     [len(rollbackLimits) + 1]atomic.Uint64
	rollbackStart atomic.Int64 // catch-up point (unix ns) of the rollback counted last; 0: none
}

// New checks cfg and returns the metrics, with every request counter
// created at zero.
func New(cfg Config) (*Metrics, error) {
	if cfg.Snapshot == nil {
		return nil, fmt.Errorf("%w: Snapshot is required", errBadConfig)
	}
	if cfg.RollbackTolerance < 0 {
		return nil, fmt.Errorf("%w: rollback tolerance %v is negative", errBadConfig, cfg.RollbackTolerance)
	}
	switch cfg.RollbackPolicy {
	case "", "leave", "borrow":
	default:
		return nil, fmt.Errorf("%w: rollback policy %q, want leave or borrow", errBadConfig, cfg.RollbackPolicy)
	}
	return &Metrics{snapshot: cfg.Snapshot, tolerance: sizeIndex(cfg.RollbackTolerance), process: cfg.ProcessMetrics, policy: cfg.RollbackPolicy,
		revision: buildRevision(debug.ReadBuildInfo())}, nil
}

// Request counts one request by endpoint (one at or beyond
// endpoint.Count counts as endpoint.Other) and status class. It
// does not allocate.
func (m *Metrics) Request(ep endpoint.Endpoint, status int) {
	if ep >= endpoint.Count {
		ep = endpoint.Other
	}
	m.requests[int(ep)*numClasses+classIndex(status)].Add(1)
}

// IssuedIDs counts n issued IDs (n < 1 is ignored). It does not allocate.
func (m *Metrics) IssuedIDs(n int) {
	if n > 0 {
		m.ids.Add(uint64(n))
	}
}

// ObserveRollback reports that the clock reading at was behind before the
// last issued ID, beyond the tolerance. The node calls it wherever it calls
// clockguard.Rollback.Trip: for every *snowflake.RollbackError (its Behind
// and At) and from the watcher's OnRollback. Reports of the same rollback
// are merged (see rollbackMergeWindow); the first report of a rollback sets
// its size class. The catch-up point is at+behind, from the reading that
// measured behind, never from a later one: the clock may have been set
// right in between, and a later reading plus the old behind would point
// seconds away and count the same rollback twice. It is quick, does not
// block or allocate, and does nothing on a nil *Metrics or for behind <= 0,
// so it may be wired before the metrics exist.
func (m *Metrics) ObserveRollback(behind time.Duration, at time.Time) {
	if m == nil || behind <= 0 {
		return
	}
	p := at.UnixNano() + int64(behind)
	for range 100 { // bounded: each failed CAS means another report won
		start := m.rollbackStart.Load()
		if start != 0 && p <= start+int64(rollbackMergeWindow) {
			return // the same rollback
		}
		if m.rollbackStart.CompareAndSwap(start, p) {
			m.rollbacks[sizeIndex(behind)].Add(1)
			return
		}
	}
}

// WritePrometheus writes every family in the Prometheus text format to w,
// each with its HELP and TYPE lines (the exposition passes promtool check
// metrics).
func (m *Metrics) WritePrometheus(w io.Writer) {
	e := &expo{b: make([]byte, 0, 16<<10)}
	m.writeRequests(e)
	m.writeSnapshot(e)
	if m.process {
		writeProcess(e)
	}
	_, _ = w.Write(e.b)
}

// Content type of the exposition and of the 405 error.
const (
	contentTypeText = "text/plain; version=0.0.4; charset=utf-8"
	contentTypeJSON = "application/json"
)

// Handler returns the handler of GET /metrics (HEAD too, like the API's own
// endpoints; 405 with a JSON error otherwise). It does not look at the
// path: mount it at /metrics with server.Config.Routes.
func (m *Metrics) Handler() fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		ctx.Response.Header.Set("Cache-Control", "no-store")
		if !ctx.IsGet() && !ctx.IsHead() {
			ctx.Response.Header.Set("Allow", "GET, HEAD")
			ctx.SetStatusCode(fasthttp.StatusMethodNotAllowed)
			ctx.SetContentType(contentTypeJSON)
			ctx.SetBodyString(`{"error":{"code":"method_not_allowed","message":"use GET or HEAD on /metrics"}}`)
			return
		}
		ctx.SetStatusCode(fasthttp.StatusOK)
		ctx.SetContentType(contentTypeText)
		m.WritePrometheus(ctx)
	}
}
