package coordinator

import (
	"codeberg.org/snowflaked/snowflaked/internal/partstatus"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
	"codeberg.org/snowflaked/snowflaked/internal/zkconn"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// Sentinel errors callers branch on. Every error wrapping one of them names
// the figures (holders, layouts, counts).
var (
	// ErrZKUnavailable: ZooKeeper could not be reached in time. After Claim,
	// the node may fall back to its cache file (ResumeFromCache).
	ErrZKUnavailable = zkclient.ErrUnavailable
	// ErrLayoutMismatch: the cluster znode holds a different layout.
	ErrLayoutMismatch = errors.New("cluster layout mismatch")
	// ErrLeaseHeld: the worker ID's lease is held by another live process.
	ErrLeaseHeld = errors.New("worker lease held by another process")
	// errNoFreeWorkerID: the worker-ID space is exhausted and nothing can be
	// recycled.
	errNoFreeWorkerID = errors.New("no free worker ID")
	// ErrClusterMismatch: a setting every node must share (--recycle-after)
	// differs from the one recorded in the cluster znode.
	ErrClusterMismatch = errors.New("cluster setting mismatch")
	// ErrOpenACL: the node runs with --zk-auth, and a znode of its cluster
	// can be changed without the cluster's credentials.
	ErrOpenACL = errors.New("cluster znodes writable without credentials")
	// ErrIncarnationMismatch: the cache file belongs to another incarnation
	// of the cluster (ZooKeeper rebuilt, or another ensemble).
	ErrIncarnationMismatch = errors.New("cluster incarnation mismatch")
)

// Prior is what the node's cache file says about its previous run, for
// Claim: nothing in it is trusted for safety except by the rules below.
type Prior struct {
	// Incarnation the cache file recorded ("" for none): another one in
	// ZooKeeper refuses the claim with ErrIncarnationMismatch unless
	// AcceptIncarnation is set.
	Incarnation       string
	AcceptIncarnation bool
	// Session ("0x…") that held the lease in the previous run on this disk.
	// The caller must hold the cache file's lock: the process of that
	// session is then provably gone, and Claim deletes a lease it left at
	// once instead of waiting for its session to expire.
	Session string
}

// Resume is what ResumeFromCache needs from the cache file.
type Resume struct {
	WorkerID int64
	// Token and ZKFence: ZooKeeper acknowledged ZKFence for Token, so the
	// node may issue up to it while ZooKeeper is away (never beyond).
	Token   string
	ZKFence snowflake.UnixMilli
	// Session ("0x…") and Incarnation as in Prior.
	Session     string
	Incarnation string
	// LastReport (0: unknown) is when a renewal last reached ZooKeeper.
	LastReport snowflake.UnixMilli
}

// Identity is what Claim established.
type Identity struct {
	// WorkerID is this node's worker ID.
	WorkerID int64
	// PrevFence is the ZooKeeper fence of the worker ID's
	// previous holder, read in the claim's multi (the evicted owner's when
	// Recycled); 0 if none. No process issued beyond it: issue only later
	// ticks (or, when PrevToken is the token of the cache file, after its
	// fence).
	PrevFence snowflake.UnixMilli
	// ZKFence is the fence ZooKeeper acknowledged for Token: the node may
	// issue up to it until a renewal moves it.
	ZKFence snowflake.UnixMilli
	// Token is this process's new instance token; PrevToken the one it
	// replaced in the forever znode ("" for none).
	Token, PrevToken string
	// Incarnation is the cluster's incarnation.
	Incarnation string
	// Session ("0x…") holds the lease; "" when the claim committed without
	// it (a stale lease of this node key is still there: Run takes the lease
	// once it expires, and lease_lost keeps the node out until then).
	Session string
	// Path is this node key's forever znode.
	Path string
	// Recycled is true when this Claim took the worker ID over from another
	// node key (so the local cache, if any, is for another worker ID).
	Recycled bool
	// PrevNodeKey and PrevAddr name the previous holder whose fence is
	// PrevFence (this node key itself, an earlier process of it, unless
	// Recycled); "" when unknown.
	PrevNodeKey, PrevAddr string
	// PrevStopped: that holder stopped cleanly, so its fence is the time of
	// its last ID, not a lease fence up to --zk-fence-ahead ahead of it.
	PrevStopped bool
	// RecycleAfter is the cluster's recycle-after as this Claim read it
	// from the cluster znode (Config.RecycleAfter when that is set: they
	// are equal), the one its scan for a free worker ID used.
	RecycleAfter time.Duration
}

// Peer is a live node found under alive/.
type Peer struct {
	WorkerID int64  `json:"worker_id"`
	Addr     string `json:"addr"` // host:port of its HTTP API
}

// Fencer is the node's side of the ZooKeeper fence: Run reads the last
// issued time for its reports and hands the node every fence ZooKeeper
// acknowledges. *node's generator wrapper satisfies it.
type Fencer interface {
	// LastIssued is the timestamp of the last issued ID.
	LastIssued() snowflake.UnixMilli
	// SetZKFence lets the node issue up to fence: ZooKeeper has
	// acknowledged it for this process's token. Values only grow.
	SetZKFence(fence snowflake.UnixMilli)
	// RaiseFloor makes every later ID's tick come after fence: a re-claim
	// of the worker ID found another holder's fence there. Called before
	// the new token's fence is handed over with SetZKFence.
	RaiseFloor(fence snowflake.UnixMilli) error
}

type mode int8

const (
	modeNone    mode = iota // neither Claim nor ResumeFromCache succeeded yet
	modeClaimed             // Claim succeeded
	modeResumed             // serving a cached worker ID; ZK not verified yet
)

// Coordinator is one node's link to the cluster in ZooKeeper. Create it with
// New, then Claim (or ResumeFromCache after ErrZKUnavailable), Attach, Run,
// and finally Close. Status, PeerIDs and PeerAddrs may be called at any
// time, from any goroutine.
type Coordinator struct {
	cfg             Config
	log             zerolog.Logger
	clk             clock.Clock
	p               paths
	acl, rootACL    []zk.ACL
	authUser, authP string
	opTimeout       time.Duration // bound of one ZooKeeper call
	resyncEvery     time.Duration // Run's periodic resync

	wake chan struct{} // session events and Close poke Run (coalesced)

	// holdRenewals, when set, skips renewals while it returns true (the
	// node's clock is suspect); set before Run.
	holdRenewals func() bool

	// negotiatedMs is the session timeout the server granted (ms), learnt
	// from the client's "authenticated" log line; 0 until known.
	negotiatedMs atomic.Int64

	connMu sync.Mutex
	conn   zkconn.Conn
	authed bool // AddAuth done on conn

	// guard and its checks are set once by Attach.
	guardMu    sync.Mutex
	guard      *health.Guard
	leaseCheck *health.Check
	fenceCheck *health.Check
	guardSub   <-chan struct{}

	mu sync.Mutex
	st state

	// progress says what Claim waits for (ClaimProgress); guarded by mu.
	progress claimProgress

	// peers is the picture of alive/ that PeerIDs and PeerAddrs keep.
	peers peerView
}

// claimProgress is what Claim is doing: a step, or the wait for a lease
// until a deadline.
type claimProgress struct {
	step      string
	leaseWait string    // the wait for a lease, "" for none
	until     time.Time // the end of the lease wait
}

// ClaimProgress says what Claim waits for now, for /readyz while the node
// starts ("" once it returned): the ZooKeeper connection, the cluster
// znodes, the previous session's lease (with the time left), the claim.
func (c *Coordinator) ClaimProgress() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.progress
	if p.leaseWait != "" {
		return fmt.Sprintf("%s; up to %v more", p.leaseWait, max(time.Until(p.until), 0).Round(100*time.Millisecond))
	}
	return p.step
}

// setProgress records the step Claim is at (and ends a lease wait).
func (c *Coordinator) setProgress(step string) {
	c.mu.Lock()
	c.progress = claimProgress{step: step}
	c.mu.Unlock()
}

// state is the coordinator's view of its ZooKeeper presence; guarded by mu.
type state struct {
	mode     mode
	workerID int64
	path     string // forever znode
	version  int32  // its data version as last written or read by us: the fencing token
	data     foreverData
	verified bool // the forever znode maps our key to workerID with our token (always after Claim)

	// token is this process's instance token; acked the fence ZooKeeper
	// acknowledged for it: the node issues up to it, no further.
	token       string
	acked       snowflake.UnixMilli
	incarnation string // the cluster's (from ZooKeeper, or the cache after ResumeFromCache)
	// reclaim: after ResumeFromCache, ZooKeeper showed another token on our
	// worker ID: the next lease attempt is a fresh claim (new token, floor
	// raised to the fence found). reclaimToken is that claim's token, drawn
	// once: every attempt writes the same one, so an attempt whose answer
	// was lost is recognised as ours by the next.
	reclaim      bool
	reclaimToken string

	leaseHeld    bool
	leaseSession int64
	leaseDetail  string // why the lease is not held
	blocked      string // a permanent reason not to (re)take the lease
	aliveOwned   bool

	lastReport snowflake.UnixMilli // the last renewal that reached ZK
	renewErr   string
	reason     string // the guard's reason when out of service, for the next report
	reports    int64
	failures   int64
	failedBy   map[string]int64 // renewal failures by cause

	running, closed bool
	stop            chan struct{}
	runDone         chan struct{}
}

// New validates cfg (errors wrap ErrInvalidConfig) and returns a
// coordinator. It does not connect.
func New(cfg Config) (*Coordinator, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Coordinator{
		cfg: cfg, log: cfg.Log.With().Str("component", "coordinator").Logger(), clk: cfg.Clock,
		p:           newPaths(cfg.Cluster),
		opTimeout:   max(cfg.SessionTimeout, 2*time.Second),
		resyncEvery: min(max(cfg.ReportInterval/3, 100*time.Millisecond), 2*time.Second),
		wake:        make(chan struct{}, 1),
	}
	c.acl, c.rootACL = zkclient.ACLs(cfg.Auth)
	if cfg.Auth != "" {
		c.authUser, c.authP, _ = strings.Cut(cfg.Auth, ":")
	}
	c.st = state{workerID: noWorker, stop: make(chan struct{}), failedBy: map[string]int64{}}
	return c, nil
}

// sessionTimeout is the granted session timeout if known, else the
// configured one.
func (c *Coordinator) sessionTimeout() time.Duration {
	if ms := c.negotiatedMs.Load(); ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return c.cfg.SessionTimeout
}

// staleLeaseWait bounds how long Claim waits for the lease of a dead session
// of this node key: the session timeout (the larger of granted and
// configured: the dead process had the same settings) plus a margin for the
// server's expiry tick.
func (c *Coordinator) staleLeaseWait() time.Duration {
	t := max(c.sessionTimeout(), c.cfg.SessionTimeout)
	return t + max(t/2, time.Second)
}

// onEvent is the ZooKeeper client's event callback: it must never block.
func (c *Coordinator) onEvent(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// dial returns the connection, creating it (without waiting) if needed.
func (c *Coordinator) dial() (zkconn.Conn, error) {
	c.connMu.Lock()
	defer c.connMu.Unlock()
	if c.conn != nil {
		return c.conn, nil
	}
	conn, err := c.cfg.Dial(c.cfg.Servers, zkconn.Options{SessionTimeout: c.cfg.SessionTimeout,
		OnEvent: c.onEvent, Logger: zkclient.Logger{Log: c.log, Negotiated: &c.negotiatedMs}})
	if err != nil {
		return nil, fmt.Errorf("%w: connect to %s: %v", ErrZKUnavailable, strings.Join(c.cfg.Servers, ","), err)
	}
	c.conn = conn
	return conn, nil
}

func (c *Coordinator) getConn() zkconn.Conn {
	c.connMu.Lock()
	defer c.connMu.Unlock()
	return c.conn
}

// ensureAuth adds the digest credentials once per connection (the client
// re-sends them on every reconnect by itself).
func (c *Coordinator) ensureAuth(ctx context.Context, conn zkconn.Conn) error {
	if c.cfg.Auth == "" {
		return nil
	}
	c.connMu.Lock()
	done := c.authed
	c.connMu.Unlock()
	if done {
		return nil
	}
	if _, err := zkclient.Call(ctx, c.opTimeout, func() (struct{}, error) {
		return struct{}{}, conn.AddAuth("digest", []byte(c.cfg.Auth))
	}); err != nil {
		return fmt.Errorf("add digest auth for user %q: %w", c.authUser, err)
	}
	c.connMu.Lock()
	c.authed = true
	c.connMu.Unlock()
	return nil
}

// connect dials and waits, bounded by ConnectTimeout and ctx, for a session.
func (c *Coordinator) connect(ctx context.Context) (zkconn.Conn, error) {
	conn, err := c.dial()
	if err != nil {
		return nil, err
	}
	if err := zkclient.WaitSession(ctx, conn, c.cfg.ConnectTimeout, c.cfg.Servers); err != nil {
		return nil, err
	}
	if err := c.retry(ctx, "authenticate", func(ctx context.Context) error { return c.ensureAuth(ctx, conn) }); err != nil {
		return nil, err
	}
	return conn, nil
}

// retry runs f until it succeeds or fails for a non-transient reason;
// transient failures (and errRetryStep) are retried for up to
// ConnectTimeout, then reported as ErrZKUnavailable.
func (c *Coordinator) retry(ctx context.Context, what string, f func(context.Context) error) error {
	start := time.Now()
	backoff := 25 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := f(ctx)
		if err == nil {
			return nil
		}
		if !retryable(err) {
			return fmt.Errorf("%s: %w", what, err)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w (%v)", what, ctx.Err(), err)
		}
		if time.Since(start) >= c.cfg.ConnectTimeout || attempt >= 1000 {
			if errors.Is(err, ErrZKUnavailable) {
				return fmt.Errorf("%s: %w", what, err)
			}
			return fmt.Errorf("%s: %w: still failing after %v: %v", what, ErrZKUnavailable, time.Since(start).Round(time.Millisecond), err)
		}
		c.log.Debug().Err(err).Str("op", what).Int("attempt", attempt).Msg("zookeeper call failed, retrying")
		if !clock.Sleep(ctx, backoff) {
			return fmt.Errorf("%s: %w (%v)", what, ctx.Err(), err)
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// HoldRenewalsWhile makes Run skip fence renewals while hold returns true:
// a fence computed on a clock that jumped forward and is not confirmed must
// not reach ZooKeeper. Call it before Run.
func (c *Coordinator) HoldRenewalsWhile(hold func() bool) { c.holdRenewals = hold }

// Attach registers the lease_lost and zk_fence checks with the guard and
// subscribes to it, so Run can keep alive/<id> in step with the service
// state. Call it once, before Run. lease_lost is pending until the lease is
// held (or, after ResumeFromCache, passes until ZooKeeper answers again).
func (c *Coordinator) Attach(g *health.Guard) {
	c.guardMu.Lock()
	if c.guard != nil || g == nil {
		c.guardMu.Unlock()
		c.log.Error().Bool("nil_guard", g == nil).Msg("coordinator: Attach called twice or with a nil guard; ignored")
		return
	}
	c.guard = g
	c.leaseCheck = g.Check(health.ReasonLeaseLost)
	c.fenceCheck = g.Check(health.ReasonZKFence)
	c.guardSub = g.Subscribe()
	c.guardMu.Unlock()
	c.updateChecks(false)
}

// checks returns the registered checks (nil before Attach).
func (c *Coordinator) checks() (lease, fence *health.Check, g *health.Guard) {
	c.guardMu.Lock()
	defer c.guardMu.Unlock()
	return c.leaseCheck, c.fenceCheck, c.guard
}

// leaveMargin is the headroom below which zk_fence fails: a third of G, so
// load balancers and clients turn away well before the fence stops IDs.
func (c *Coordinator) leaveMargin() time.Duration { return c.cfg.ZKFenceAhead / 3 }

// updateChecks sets lease_lost and zk_fence from the state. It never holds
// c.mu while calling the guard (the guard may call hooks that read Status).
func (c *Coordinator) updateChecks(connected bool) {
	lease, fence, _ := c.checks()
	if lease == nil {
		return
	}
	now := snowflake.UnixMilliNow(c.clk)
	c.mu.Lock()
	st := c.st
	c.mu.Unlock()

	switch {
	case st.blocked != "":
		lease.Fail(st.blocked)
	case st.leaseHeld:
		lease.Pass()
	case st.mode == modeResumed && !st.verified && !connected:
		lease.Pass() // serving from the cache while ZooKeeper is away: the fence bounds it
	case st.mode == modeNone:
		// pending until Claim or ResumeFromCache
	default:
		d := st.leaseDetail
		if d == "" {
			d = fmt.Sprintf("lease on worker ID %d not held", st.workerID)
		}
		lease.Fail(d)
	}

	if st.mode == modeNone {
		return
	}
	headroom := time.Duration(st.acked-now) * time.Millisecond
	if headroom >= c.leaveMargin() {
		fence.Pass()
		return
	}
	why := st.renewErr
	if why == "" {
		why = "no renewal attempted yet"
	}
	fence.Fail(fenceDetail(headroom, c.leaveMargin(), c.cfg.ZKFenceAhead, why))
}

// fenceDetail says why the ZooKeeper fence check fails: the fence is only
// headroom ahead of the clock, or behind it when headroom is negative.
func fenceDetail(headroom, margin, zkFenceAhead time.Duration, why string) string {
	where := fmt.Sprintf("%s ahead of", headroom.Round(time.Millisecond))
	if headroom < 0 {
		where = fmt.Sprintf("%s behind", (-headroom).Round(time.Millisecond))
	}
	return fmt.Sprintf("ZooKeeper fence %s the clock (leaving service below %v of --zk-fence-ahead %v); last renewal problem: %s",
		where, margin, zkFenceAhead, why)
}

// ResumeFromCache tells the coordinator that the node serves r.WorkerID
// from its cache file because Claim failed with ErrZKUnavailable. The node
// may issue up to r.ZKFence (ZooKeeper acknowledged it for r.Token), no
// further, until ZooKeeper answers. Run then keeps trying ZooKeeper; when it
// answers, it checks the incarnation and that this node key's forever znode
// still maps to the worker ID: with r.Token still there it takes the lease
// and renews as if it had claimed; with another token it claims afresh
// (raising the node's floor to the fence found first); another worker ID
// (or incarnation) keeps lease_lost failing with the reason.
func (c *Coordinator) ResumeFromCache(r Resume) error {
	if !c.cfg.WorkerIDs.contains(r.WorkerID) {
		return fmt.Errorf("resume from cache: worker ID %d is outside the cluster's worker IDs %s (layout %s)", r.WorkerID, c.cfg.WorkerIDs, c.cfg.Layout)
	}
	if r.LastReport < 0 || r.ZKFence < 0 {
		return fmt.Errorf("resume from cache: last report %d or ZooKeeper fence %d is negative", r.LastReport, r.ZKFence)
	}
	c.mu.Lock()
	if c.st.mode != modeNone || c.st.closed {
		m := c.st.mode
		c.mu.Unlock()
		return fmt.Errorf("resume from cache: coordinator already in mode %d or closed", m)
	}
	c.st.mode, c.st.workerID = modeResumed, r.WorkerID
	c.st.token, c.st.acked, c.st.incarnation, c.st.lastReport = r.Token, r.ZKFence, r.Incarnation, r.LastReport
	if r.Token == "" {
		c.st.acked = 0 // a cache file from before fencing tokens grants nothing
	}
	c.st.leaseDetail = "re-establishing the lease now that ZooKeeper answers"
	c.st.renewErr = "ZooKeeper unreachable at start"
	c.mu.Unlock()
	c.log.Warn().Int64("worker_id", r.WorkerID).Int64("zk_fence", int64(r.ZKFence)).Int64("last_reported", int64(r.LastReport)).
		Msg("serving the cached worker ID while ZooKeeper is unreachable, up to the ZooKeeper fence it acknowledged")
	c.updateChecks(false)
	return nil
}

// Status is the coordinator's state for /clock, the status page and the
// metrics page: a plain value of internal/partstatus, below the views that
// render it, so that a view need not import the coordinator.
type Status = partstatus.ZK

// Status returns a snapshot. It makes no ZooKeeper call.
func (c *Coordinator) Status() Status {
	c.mu.Lock()
	st := c.st
	failedBy := make(map[string]int64, len(st.failedBy)) // the map is shared: copy it under the lock
	for k, v := range st.failedBy {
		failedBy[k] = v
	}
	c.mu.Unlock()
	now := snowflake.UnixMilliNow(c.clk)
	s := Status{
		WorkerID: st.workerID, LeaseHeld: st.leaseHeld, AlivePresent: st.aliveOwned,
		FromCache: st.mode == modeResumed && !st.verified, LastReport: st.lastReport,
		LastReportAgeMs: -1, ZKFence: st.acked, ZKFenceHeadroomMs: st.acked.Sub(now).Milliseconds(),
		ZKFenceAheadMs: c.cfg.ZKFenceAhead.Milliseconds(), Token: st.token, Incarnation: st.incarnation,
		Reports: st.reports, ReportFailures: st.failures, RenewError: st.renewErr,
		FailuresByCause: failedBy,
		SessionState:    "not_connected", SessionTimeoutMs: c.sessionTimeout().Milliseconds(),
	}
	if st.acked == 0 {
		s.ZKFenceHeadroomMs = 0
	}
	if st.leaseHeld {
		s.LeaseSession = sessionHex(st.leaseSession)
	}
	if st.blocked != "" {
		s.LeaseDetail = st.blocked
	} else if !st.leaseHeld {
		s.LeaseDetail = st.leaseDetail
	}
	if st.lastReport > 0 {
		s.LastReportAgeMs = max(now.Sub(st.lastReport).Milliseconds(), 0)
	}
	if conn := c.getConn(); conn != nil {
		state := conn.State()
		s.Connected = state == zk.StateHasSession
		s.SessionState = state.String()
		if id := conn.SessionID(); id != 0 {
			s.SessionID = sessionHex(id)
		}
	}
	return s
}
