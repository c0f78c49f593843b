package clockguard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/clock"
)

// Peer check defaults.
const (
	DefaultPeerInterval    = 30 * time.Second
	DefaultPeerMaxOffset   = time.Second
	DefaultPeerTimeout     = 2 * time.Second
	DefaultPeerConcurrency = 16
)

// PeerTimePath is the path peers serve their time on.
const PeerTimePath = "/time"

// maxTimeBody bounds a peer's /time answer.
const maxTimeBody = 4096

// maxDetailPeers bounds how many peers a failure detail lists.
const maxDetailPeers = 5

// ErrPeerOffset is returned by Peers.CheckNow when the node is the outlier:
// a strict majority of the clocks it compared is beyond the maximum offset.
var ErrPeerOffset = errors.New("clock disagrees with a majority of the peers")

// Peer is another live node to compare clocks with.
type Peer struct {
	WorkerID int64  `json:"worker_id"`
	Addr     string `json:"addr"` // "host:port" of its HTTP API
}

// PeerSource lists the live peers, excluding the node itself. The
// coordinator implements it from ZooKeeper's alive znodes.
type PeerSource interface {
	Peers(ctx context.Context) ([]Peer, error)
}

// PeerSourceFunc adapts a function to PeerSource.
type PeerSourceFunc func(ctx context.Context) ([]Peer, error)

// Peers calls f.
func (f PeerSourceFunc) Peers(ctx context.Context) ([]Peer, error) { return f(ctx) }

// PeersConfig configures the peer check. Zero values take the defaults.
type PeersConfig struct {
	// Interval between rounds (default 30s).
	Interval time.Duration
	// MaxOffset is the largest |offset| at which another clock agrees with
	// this one (default 1s).
	MaxOffset time.Duration
	// Timeout of one request to one peer, connection included (default 2s).
	// A round, and so Run's return after ctx ends, takes at most about this
	// long per Concurrency peers.
	Timeout time.Duration
	// Concurrency bounds the requests in flight (default 16).
	Concurrency int
	// Client makes the requests; by default a client without keep-alive or
	// retries (a retry would distort the round-trip time).
	Client *fasthttp.Client
	// Log receives a line per failing round and per round with unreachable
	// peers.
	Log zerolog.Logger
}

// PeerResult is what one peer answered in the last round.
type PeerResult struct {
	WorkerID int64  `json:"worker_id"`
	Addr     string `json:"addr"`
	// Offset is the peer's clock minus the node's, corrected for half the
	// round trip: positive when the peer is ahead.
	Offset    time.Duration `json:"offset_ns"`
	RTT       time.Duration `json:"rtt_ns"`
	Error     string        `json:"error,omitempty"` // why the peer did not count; "" when it did
	CheckedAt time.Time     `json:"checked_at"`      // the node's (injected) wall clock
}

// Reachable reports whether the peer's answer counted.
func (r PeerResult) Reachable() bool { return r.Error == "" }

// PeerSnapshot is what /clock and metrics show of the peer check.
type PeerSnapshot struct {
	MaxOffset time.Duration `json:"max_offset_ns"`
	// Peers, Median, Reachable and Unreachable are from the last round that
	// got a peer list (Reachable and Unreachable count peers; Median is over
	// the reachable peers and the node itself, offset 0).
	Peers       []PeerResult  `json:"peers"`
	Median      time.Duration `json:"median_offset_ns"`
	Reachable   int           `json:"reachable"`
	Unreachable int           `json:"unreachable"`
	// Agree and Disagree count the clocks compared, the node's own included
	// (it agrees with itself), within and beyond MaxOffset of this one.
	// Split: some disagree but neither side is a strict majority, so this
	// node cannot tell whose clock is wrong: it stays in service and
	// leaves the verdict to NTP.
	Agree    int  `json:"agree"`
	Disagree int  `json:"disagree"`
	Split    bool `json:"split"`
	// Detail describes the last round's disagreement (outlier or split);
	// "" when every clock agreed.
	Detail string `json:"detail,omitempty"`
	// CheckedAt is when the last round ended; SourceError is why it got no
	// peer list ("" when it did).
	CheckedAt   time.Time `json:"checked_at,omitzero"`
	SourceError string    `json:"source_error,omitempty"`
	// Counters since the start.
	Rounds           int64 `json:"rounds"`
	OffsetFailures   int64 `json:"offset_failures"`   // rounds in which a majority disagreed (this node the outlier)
	SplitRounds      int64 `json:"split_rounds"`      // rounds with a disagreement and no majority
	UnreachablePeers int64 `json:"unreachable_peers"` // failed peer requests
	SourceErrors     int64 `json:"source_errors"`     // rounds without a peer list
}

// Outlier reports whether the last verdict keeps this node out: a strict
// majority of the clocks compared, its own counted, disagreed with it.
// False before the first verdict.
func (s PeerSnapshot) Outlier() bool { return s.Disagree > s.Agree }

// Peers is the peer check (reason peer_offset): it asks live peers for their
// time and fails only when this node is the outlier: more than half of the
// clocks it could compare (its own counted: the source lists only others)
// are more than MaxOffset away. A disagreement without a majority either way (two
// clocks, or a tie) passes and is flagged (Split): a node cannot tell
// whether it or the other is wrong, and two good nodes must not leave
// because of one bad one. With no peer reachable it passes.
type Peers struct {
	clk    clock.Clock
	src    PeerSource
	cfg    PeersConfig
	client *fasthttp.Client
	check  *Check

	round  sync.Mutex // serialises rounds so verdicts land in order
	sched  *rounds
	mu     sync.Mutex
	snap   PeerSnapshot
	judged bool // peer_offset has had a verdict
}

// NewPeers registers the peer_offset check (pending: the node enters service
// only after a first round) with g and returns the peer check. It fails on a
// nil clock or source and on negative values.
func NewPeers(g *Guard, c clock.Clock, src PeerSource, cfg PeersConfig) (*Peers, error) {
	if c == nil || src == nil {
		return nil, fmt.Errorf("%w: peers: nil clock or peer source", ErrBadConfig)
	}
	if cfg.Interval < 0 || cfg.MaxOffset < 0 || cfg.Timeout < 0 || cfg.Concurrency < 0 {
		return nil, fmt.Errorf("%w: peers: negative value (interval %v, max offset %v, timeout %v, concurrency %d)",
			ErrBadConfig, cfg.Interval, cfg.MaxOffset, cfg.Timeout, cfg.Concurrency)
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultPeerInterval
	}
	if cfg.MaxOffset == 0 {
		cfg.MaxOffset = DefaultPeerMaxOffset
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultPeerTimeout
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = DefaultPeerConcurrency
	}
	client := cfg.Client
	if client == nil {
		client = newPeerClient(cfg.Timeout)
	}
	return &Peers{
		clk: c, src: src, cfg: cfg, client: client,
		check: g.Check(ReasonPeerOffset),
		sched: newRounds(),
		snap:  PeerSnapshot{MaxOffset: cfg.MaxOffset},
	}, nil
}

// newPeerClient returns a client for one-off requests: no keep-alive (rounds
// are far apart), no retries, a small body limit, and a plain net.Dialer so
// that no background goroutine outlives the requests for long.
func newPeerClient(timeout time.Duration) *fasthttp.Client {
	return &fasthttp.Client{
		Name:                      "snowflaked-peer-check",
		MaxIdemponentCallAttempts: 1,
		MaxIdleConnDuration:       time.Second,
		MaxResponseBodySize:       maxTimeBody,
		ReadTimeout:               timeout,
		WriteTimeout:              timeout,
		DialTimeout: func(addr string, timeout time.Duration) (net.Conn, error) {
			return (&net.Dialer{Timeout: timeout}).Dial("tcp", addr)
		},
	}
}

// Run does a round at once and then one every Interval, until ctx ends;
// sooner while a round (Run's or CheckNow's) could not list the peers and
// the verdict before it keeps the node out: after 250ms, then twice as
// late each time, up to 30s.
func (p *Peers) Run(ctx context.Context) {
	p.sched.run(ctx, p.cfg.Interval, func() { _, _ = p.CheckNow(ctx) })
}

// CheckNow does one round: it lists the peers, asks each for its time
// (concurrently, each bounded by Timeout), takes the median offset of those
// that answered and passes or fails peer_offset. No peers, or none
// reachable, passes. When the source fails, the earlier verdict stays (a
// first round passes). It returns the snapshot after the round, and an error
// wrapping ErrPeerOffset when the median is beyond the maximum, the source's
// error when it failed, or ctx's error when ctx ended first (then no verdict
// is given).
func (p *Peers) CheckNow(ctx context.Context) (PeerSnapshot, error) {
	p.round.Lock()
	defer p.round.Unlock()

	peers, err := p.src.Peers(ctx)
	if ctxErr := ctx.Err(); ctxErr != nil {
		return p.Snapshot(), fmt.Errorf("peer check: %w", ctxErr)
	}
	if err != nil {
		return p.judgeSourceError(err)
	}
	results := p.askAll(ctx, peers)
	if ctxErr := ctx.Err(); ctxErr != nil {
		return p.Snapshot(), fmt.Errorf("peer check: %w", ctxErr)
	}
	return p.judge(results)
}

// askAll asks every peer, at most Concurrency at a time.
func (p *Peers) askAll(ctx context.Context, peers []Peer) []PeerResult {
	results := make([]PeerResult, len(peers))
	sem := make(chan struct{}, p.cfg.Concurrency)
	var wg sync.WaitGroup
	for i, peer := range peers {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			results[i] = PeerResult{WorkerID: peer.WorkerID, Addr: peer.Addr, Error: ctx.Err().Error()}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			results[i] = p.ask(peer)
		}()
	}
	wg.Wait()
	return results
}

// ask requests one peer's time. The offset is the peer's time minus the
// midpoint of the request on the node's clock: the wall time at sending plus
// half the round trip measured on the monotonic clock (so a wall step during
// the request does not distort it).
func (p *Peers) ask(peer Peer) PeerResult {
	res := PeerResult{WorkerID: peer.WorkerID, Addr: peer.Addr}
	fail := func(err error) PeerResult {
		res.Error = err.Error()
		res.CheckedAt = clock.WallTime(p.clk)
		return res
	}
	if err := checkPeerAddr(peer.Addr); err != nil {
		return fail(err)
	}
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://" + peer.Addr + PeerTimePath)
	req.Header.SetMethod(fasthttp.MethodGet)
	req.SetConnectionClose()

	sendWall := p.clk.WallNanos()
	m0 := p.clk.Mono()
	err := p.client.DoTimeout(req, resp, p.cfg.Timeout)
	m1 := p.clk.Mono()
	if err != nil {
		return fail(fmt.Errorf("GET %s: %w", PeerTimePath, err))
	}
	if sc := resp.StatusCode(); sc != fasthttp.StatusOK {
		return fail(fmt.Errorf("GET %s: status %d", PeerTimePath, sc))
	}
	peerNs, err := parsePeerTime(resp.Body())
	if err != nil {
		return fail(fmt.Errorf("GET %s: %w", PeerTimePath, err))
	}
	res.RTT = m1 - m0
	res.Offset = time.Duration(peerNs - (sendWall + int64(res.RTT/2)))
	res.CheckedAt = clock.WallTime(p.clk)
	return res
}

// checkPeerAddr accepts "host:port" with a non-empty host and a valid port.
func checkPeerAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("bad peer address %q: %w", addr, err)
	}
	if n, err := strconv.Atoi(port); host == "" || err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("bad peer address %q: want host:port", addr)
	}
	return nil
}

// parsePeerTime reads {"unix_ns":…} or {"unix_ms":…} and returns Unix
// nanoseconds. A milliseconds-only answer is taken at the middle of its
// millisecond.
func parsePeerTime(body []byte) (int64, error) {
	var v struct {
		UnixMS *int64 `json:"unix_ms"`
		UnixNS *int64 `json:"unix_ns"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return 0, fmt.Errorf("decode time: %w", err)
	}
	switch {
	case v.UnixNS != nil && *v.UnixNS > 0:
		return *v.UnixNS, nil
	case v.UnixMS != nil && *v.UnixMS > 0:
		return *v.UnixMS*int64(time.Millisecond) + int64(time.Millisecond/2), nil
	}
	return 0, errors.New("decode time: no positive unix_ns or unix_ms")
}

// verdict applies the majority rule to a round's reachable offsets: out
// when a strict majority disagrees, split when some disagree and neither
// side has a strict majority.
func verdict(offsets []time.Duration, maxOffset time.Duration) (agree, disagree int, out, split bool) {
	for _, o := range offsets {
		if abs(o) > maxOffset {
			disagree++
		} else {
			agree++
		}
	}
	n := agree + disagree
	out = 2*disagree > n
	split = !out && disagree > 0 && 2*agree <= n
	return agree, disagree, out, split
}

// judge gives the verdict for a round's results.
func (p *Peers) judge(results []PeerResult) (PeerSnapshot, error) {
	var offsets []time.Duration
	var errs []string
	for _, r := range results {
		if r.Reachable() {
			offsets = append(offsets, r.Offset)
		} else {
			errs = append(errs, fmt.Sprintf("worker %d %s: %s", r.WorkerID, r.Addr, r.Error))
		}
	}
	// The node's own clock is one of the clocks compared (offset 0): it
	// always agrees with itself.
	clocks := append([]time.Duration{0}, offsets...)
	median := medianOf(clocks)
	agree, disagree, out, split := verdict(clocks, p.cfg.MaxOffset)
	var err error
	var detail string
	if out || split {
		detail = p.offsetDetail(results, agree, disagree, out)
	}
	if out {
		err = fmt.Errorf("%w: %s", ErrPeerOffset, detail)
	}

	p.mu.Lock()
	p.snap.Peers = results
	p.snap.Median = median
	p.snap.Reachable = len(offsets)
	p.snap.Unreachable = len(errs)
	p.snap.Agree, p.snap.Disagree, p.snap.Split, p.snap.Detail = agree, disagree, split, detail
	p.snap.CheckedAt = clock.WallTime(p.clk)
	p.snap.SourceError = ""
	p.snap.Rounds++
	p.snap.UnreachablePeers += int64(len(errs))
	if err != nil {
		p.snap.OffsetFailures++
	}
	if split {
		p.snap.SplitRounds++
	}
	p.judged = true
	snap := p.snapshotLocked()
	p.mu.Unlock()
	p.sched.ended(false)

	if len(errs) > 0 {
		p.cfg.Log.Warn().Int("unreachable", len(errs)).Int("reachable", len(offsets)).
			Str("errors", strings.Join(errs, "; ")).Msg("peers unreachable for the clock check")
	}
	switch {
	case err != nil:
		p.check.Fail(detail)
		p.cfg.Log.Warn().Int("agree", agree).Int("disagree", disagree).
			Dur("max_offset", p.cfg.MaxOffset).Str("detail", detail).Msg("clock disagrees with a majority of the peers")
		return snap, err
	case split:
		p.cfg.Log.Warn().Int("agree", agree).Int("disagree", disagree).Dur("max_offset", p.cfg.MaxOffset).Str("detail", detail).
			Msg("clocks disagree with no majority either way: staying in service, NTP (if configured) decides")
	}
	p.check.Pass()
	return snap, nil
}

// offsetDetail describes a round with a disagreement, with its figures.
func (p *Peers) offsetDetail(results []PeerResult, agree, disagree int, out bool) string {
	var b strings.Builder
	if out {
		fmt.Fprintf(&b, "clock more than %v from %d of %d clocks compared (itself counted): the outlier;", p.cfg.MaxOffset, disagree, agree+disagree)
	} else {
		fmt.Fprintf(&b, "no majority: %d of %d clocks compared (itself counted) are more than %v away, %d agree;", disagree, agree+disagree, p.cfg.MaxOffset, agree)
	}
	listed := 0
	for _, r := range results {
		if !r.Reachable() {
			continue
		}
		if listed == maxDetailPeers {
			fmt.Fprintf(&b, " and %d more", agree+disagree-listed)
			break
		}
		if listed > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " worker %d %s %s (rtt %v)", r.WorkerID, r.Addr, signed(r.Offset), r.RTT)
		listed++
	}
	return b.String()
}

// judgeSourceError records a round without a peer list: the verdict stays,
// or passes if there was none. A verdict against the node that stays is
// stale: Run retries soon.
func (p *Peers) judgeSourceError(err error) (PeerSnapshot, error) {
	err = fmt.Errorf("peer check: list peers: %w", err)
	p.mu.Lock()
	p.snap.CheckedAt = clock.WallTime(p.clk)
	p.snap.SourceError = err.Error()
	p.snap.Rounds++
	p.snap.SourceErrors++
	judged, out := p.judged, p.snap.Outlier()
	count := p.snap.SourceErrors
	snap := p.snapshotLocked()
	p.mu.Unlock()
	if !judged {
		p.check.Pass()
	}
	p.sched.ended(out)
	p.cfg.Log.Warn().Err(err).Int64("source_errors", count).Msg("peer clock check skipped")
	return snap, err
}

// medianOf returns the median of ds (the mean of the middle two for an even
// count), or 0 for none.
func medianOf(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	mid := len(s) / 2
	if len(s)%2 == 1 {
		return s[mid]
	}
	return s[mid-1] + (s[mid]-s[mid-1])/2
}

// Snapshot returns the last round's results and the counters.
func (p *Peers) Snapshot() PeerSnapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.snapshotLocked()
}

// snapshotLocked copies the snapshot; p.mu is held.
func (p *Peers) snapshotLocked() PeerSnapshot {
	s := p.snap
	s.Peers = append([]PeerResult{}, s.Peers...) // never nil: JSON shows []
	return s
}
