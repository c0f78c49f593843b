package clockguard

import (
	"bufio"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/ctxlock"
	"codeberg.org/snowflaked/snowflaked/internal/health"
)

// Peer check defaults.
const (
	DefaultPeerInterval    = 30 * time.Second
	DefaultPeerMaxOffset   = time.Second
	defaultPeerTimeout     = 2 * time.Second
	defaultPeerConcurrency = 16
)

// peerTimePath is the path peers serve their time on.
const peerTimePath = "/time"

// maxTimeBody bounds a peer's /time answer.
const maxTimeBody = 4096

// peerSamples is how many times one round asks each peer for its time, over
// one connection; the sample with the lowest round trip is kept, as NTP
// does. The connection is made before the first sample's clock starts, so
// neither the dial nor a name lookup is in any round trip, and a stall of
// this process (or the peer) during one sample does not decide.
const peerSamples = 3

// maxDetailPeers bounds how many peers a failure detail lists.
const maxDetailPeers = 5

// errPeerOffset is returned by Peers.checkNow when the node is the outlier:
// a strict majority of the clocks it compared is beyond the maximum offset.
var errPeerOffset = errors.New("clock disagrees with a majority of the peers")

// Peer is another live node to compare clocks with.
type Peer struct {
	WorkerID int64  `json:"worker_id"`
	Addr     string `json:"addr"` // "host:port" of its HTTP API
}

// PeersConfig configures the peer check. Zero values take the defaults.
type PeersConfig struct {
	// Interval between rounds (default 30s).
	Interval time.Duration
	// MaxOffset is the largest |offset| at which another clock agrees with
	// this one (default 1s).
	MaxOffset time.Duration
	// Timeout of one peer's exchange, the connection and every sample
	// included (default 2s). A round takes at most about this long per
	// Concurrency peers; Run returns at once when ctx ends.
	Timeout time.Duration
	// Concurrency bounds the peers asked at once (default 16).
	Concurrency int
	// Sample is how many peers a round asks (default DefaultPeerSample, at
	// least MinPeerSample): all of them when there are no more live peers,
	// else that many chosen at random, half of them kept from the round
	// before (their connections are reused) and half new.
	Sample int
	// Rand chooses the samples and the jitter of the intervals (nil: seeded
	// at random). NewPeers draws the seeds of its own two sources from it
	// and uses it no more. The node seeds it from its key and its clock at
	// the start, so nodes choose differently and a simulation (a virtual
	// clock) replays.
	Rand *rand.Rand
	// Log receives a line per failing round and per round with unreachable
	// peers.
	Log zerolog.Logger
	// TLS, when not nil, makes the /time requests HTTPS with it (the peers
	// serve --tls-cert); its ServerName, when empty, is the peer's host.
	TLS *tls.Config
}

// PeerResult is what one peer answered in the last round.
type PeerResult struct {
	WorkerID int64  `json:"worker_id"`
	Addr     string `json:"addr"`
	// Offset is the peer's clock minus the node's, corrected for half the
	// round trip: positive when the peer is ahead. It is the sample with the
	// lowest round trip of peerSamples.
	Offset time.Duration `json:"offset_ns"`
	// RTT is that sample's round trip. The true offset lies within Offset ±
	// RTT/2 (the peer read its clock somewhere inside the round trip).
	RTT time.Duration `json:"rtt_ns"`
	// Judged is this clock's verdict against the maximum offset: "agrees"
	// (|offset| + rtt/2 within it), "disagrees" (|offset| − rtt/2 beyond it)
	// or "unsure" (the round trip is too wide to tell: it counts for
	// neither side); "" when the peer was not reachable.
	Judged    string    `json:"judged,omitempty"`
	Error     string    `json:"error,omitempty"` // why the peer did not count; "" when it did
	CheckedAt time.Time `json:"checked_at"`      // the node's (injected) wall clock
}

// The verdicts of one clock comparison (PeerResult.Judged).
const (
	judgedAgrees    = "agrees"
	judgedDisagrees = "disagrees"
	judgedUnsure    = "unsure"
)

// Reachable reports whether the peer's answer counted.
func (r PeerResult) Reachable() bool { return r.Error == "" }

// judgeOffset compares one clock with the maximum offset, its uncertainty
// (half the round trip) counted against whichever side it would favour.
func judgeOffset(offset, rtt, maxOffset time.Duration) string {
	half := rtt / 2
	switch {
	case abs(offset)+half <= maxOffset:
		return judgedAgrees
	case abs(offset)-half > maxOffset:
		return judgedDisagrees
	}
	return judgedUnsure
}

// votes counts clock comparisons by their verdict.
type votes struct{ agree, disagree, unsure int }

// add counts one comparison (an unreachable peer's "" counts for nothing).
func (v *votes) add(judged string) {
	switch judged {
	case judgedAgrees:
		v.agree++
	case judgedDisagrees:
		v.disagree++
	case judgedUnsure:
		v.unsure++
	}
}

// PeerSnapshot is what /clock and metrics show of the peer check.
type PeerSnapshot struct {
	MaxOffset time.Duration `json:"max_offset_ns"`
	// LivePeers is how many live peers the last round that got a peer list
	// found (the node itself not counted). Peers, Median, Reachable and
	// Unreachable are of the sample that round decided on, at most
	// PeersConfig.Sample peers whatever the cluster's size, 4 × Sample for
	// a wide one (Reachable and Unreachable count peers; Median is over the
	// reachable peers and the node itself, offset 0).
	LivePeers   int           `json:"live_peers"`
	Peers       []PeerResult  `json:"peers"`
	Median      time.Duration `json:"median_offset_ns"`
	Reachable   int           `json:"reachable"`
	Unreachable int           `json:"unreachable"`
	// Confirmation says the figures are a confirmation sample's: the
	// round's first sample found this node the outlier, so a second, fresh
	// sample was asked, and the verdict is the second's (out only when it
	// finds the outlier too); or, with Wide, the first wide sample did not
	// find it the outlier, and the verdict is the second wide sample's (back
	// in only when it does not either). FirstSample describes the first
	// sample then.
	Confirmation bool   `json:"confirmation,omitempty"`
	FirstSample  string `json:"first_sample,omitempty"`
	// Wide says the round re-checked a verdict that kept this node out
	// (the outlier), so its samples were wide: min(4 × Sample, live peers)
	// each (every live peer when that is all of them). The node returns
	// only when two consecutive wide samples, the second a confirmation
	// disjoint from the first where the cluster allows, do not find it the
	// outlier.
	Wide bool `json:"wide,omitempty"`
	// Agree and Disagree count the clocks compared, the node's own included
	// (it agrees with itself), within and beyond MaxOffset of this one, and
	// Unsure those whose round trip was too wide to tell. Split: some
	// disagree but neither side is a strict majority, so this node cannot
	// tell whose clock is wrong: it stays in service and leaves the verdict
	// to NTP.
	Agree    int  `json:"agree"`
	Disagree int  `json:"disagree"`
	Unsure   int  `json:"unsure"`
	Split    bool `json:"split"`
	// Detail describes the last round's disagreement (outlier or split);
	// "" when every clock agreed.
	Detail string `json:"detail,omitempty"`
	// CheckedAt is when the last round ended; SourceError is why it got no
	// peer list ("" when it did). A round without a peer list measured
	// nothing: the figures above stay those of the round before, and
	// measuredSince does not count it.
	CheckedAt   time.Time `json:"checked_at,omitzero"`
	SourceError string    `json:"source_error,omitempty"`
	// Counters since the start.
	Rounds           int64 `json:"rounds"`
	OffsetFailures   int64 `json:"offset_failures"`   // rounds in which a majority disagreed (this node the outlier)
	SplitRounds      int64 `json:"split_rounds"`      // rounds with a disagreement and no majority
	UnreachablePeers int64 `json:"unreachable_peers"` // failed peer requests
	SourceErrors     int64 `json:"source_errors"`     // rounds without a peer list
	Confirmations    int64 `json:"confirmations"`     // rounds that asked a confirmation sample
	Unconfirmed      int64 `json:"unconfirmed"`       // of those, rounds whose confirmation did not find this node the outlier (a removal avoided)
	WideRounds       int64 `json:"wide_rounds"`       // rounds that re-checked a verdict against this node with wide samples
	ReturnsHeld      int64 `json:"returns_held"`      // of those, rounds whose first wide sample did not find this node the outlier and whose second did (a return avoided)

	// measuredMono is the node's monotonic clock when the round whose
	// figures these are began asking; measured says there was one.
	measuredMono time.Duration
	measured     bool
}

// outlier reports whether the last verdict keeps this node out: a strict
// majority of the clocks compared, its own counted, disagreed with it.
// False before the first verdict.
func (s PeerSnapshot) outlier() bool { return outlier(s.Agree, s.Disagree, s.Unsure) }

// outlier is the majority rule: the clocks that disagree are more than
// half of all compared (unsure ones count on neither side, so they make a
// majority against the node harder, never easier).
func outlier(agree, disagree, unsure int) bool { return 2*disagree > agree+disagree+unsure }

// measuredSince reports whether the figures come from a round that began
// asking the peers at or after mono (the node's monotonic clock) and
// compared at least one peer's clock: a confirmation of an event counts
// only when it was measured after it. A round without a peer list, or with
// no peer reachable, measured nothing.
func (s PeerSnapshot) measuredSince(mono time.Duration) bool {
	return s.measured && s.measuredMono >= mono && s.Reachable > 0
}

// Peers is the peer check (reason peer_offset): each round it asks a
// random sample of the live peers (PeersConfig.Sample; all of them in a
// cluster no larger) for their time and fails only when this node is the
// outlier: more than half of the clocks of the sample it could compare
// (its own counted: the source lists only others) are more than MaxOffset
// away, and a second, fresh sample confirms it when the first did not
// cover every live peer. While that verdict keeps it out, each round (a
// re-check) asks wide samples instead, of 4 × Sample (peerWideFactor), and
// the node returns only when two of them, the second fresh, do not find it
// the outlier: a bad clock that a third or more of the cluster shares is
// outvoted within a wide sample far more surely than within a small one,
// and does not return on the first lucky sample. A disagreement without
// a majority either way (two clocks, or a tie) passes and is flagged
// (Split): a node cannot tell whether it or the other is wrong, and two
// good nodes must not leave because of one bad one. With no peer
// reachable it passes. A node's cost per round is O(Sample), whatever the
// cluster's size (at most 8 × Sample peers for a re-check while it is
// out): a sampled peer's connection is kept for the next round, which
// keeps half the sample.
type Peers struct {
	clk   clock.Clock
	src   PeerSource
	cfg   PeersConfig
	check *health.Check

	round   ctxlock.Mutex // serialises rounds so verdicts land in order (a round waits on ZooKeeper and the network)
	sampler peerSampler   // used under round
	pool    *connPool
	sched   *rounds
	out     bool // the last verdict found this node the outlier: rounds ask wide samples; used under round
	mu      sync.Mutex
	snap    PeerSnapshot
	judged  bool // peer_offset has had a verdict
}

// NewPeers registers the peer_offset check (pending: the node enters service
// only after a first round) with g and returns the peer check. It fails on a
// nil clock or source, on negative values and on a sample below
// MinPeerSample.
func NewPeers(g *health.Guard, c clock.Clock, src PeerSource, cfg PeersConfig) (*Peers, error) {
	if c == nil || src == nil {
		return nil, fmt.Errorf("%w: peers: nil clock or peer source", errBadConfig)
	}
	if cfg.Interval < 0 || cfg.MaxOffset < 0 || cfg.Timeout < 0 || cfg.Concurrency < 0 || cfg.Sample < 0 {
		return nil, fmt.Errorf("%w: peers: negative value (interval %v, max offset %v, timeout %v, concurrency %d, sample %d)",
			errBadConfig, cfg.Interval, cfg.MaxOffset, cfg.Timeout, cfg.Concurrency, cfg.Sample)
	}
	if cfg.Sample != 0 && cfg.Sample < MinPeerSample {
		return nil, fmt.Errorf("%w: peers: sample %d: want at least %d, so that one bad peer is one vote of several",
			errBadConfig, cfg.Sample, MinPeerSample)
	}
	cfg = peersDefaults(cfg)
	sampleRand, jitterRand := newPeerRands(cfg.Rand)
	cfg.Rand = nil // drawn from once: the check's own sources are seeded from it
	sched := newRounds(RetryMax)
	sched.jitter = (&jitterer{rng: jitterRand}).spread
	return &Peers{
		round: ctxlock.New(),
		clk:   c, src: src, cfg: cfg,
		check:   g.Check(health.ReasonPeerOffset),
		sampler: peerSampler{size: cfg.Sample, rng: sampleRand},
		pool:    newConnPool(),
		sched:   sched,
		snap:    PeerSnapshot{MaxOffset: cfg.MaxOffset},
	}, nil
}

// peersDefaults sets the defaults of the zero values of cfg.
func peersDefaults(cfg PeersConfig) PeersConfig {
	cfg.Interval = cmp.Or(cfg.Interval, DefaultPeerInterval)
	cfg.MaxOffset = cmp.Or(cfg.MaxOffset, DefaultPeerMaxOffset)
	cfg.Timeout = cmp.Or(cfg.Timeout, defaultPeerTimeout)
	cfg.Concurrency = cmp.Or(cfg.Concurrency, defaultPeerConcurrency)
	cfg.Sample = cmp.Or(cfg.Sample, DefaultPeerSample)
	return cfg
}

// Run does a round at once and then one every Interval, varied by up to
// 10% either way at random so that nodes started at once do not ask in
// lockstep, until ctx ends; sooner while the verdict after a round (Run's
// or checkNow's) keeps the node out, whether that round judged it the
// outlier or could not list the peers: after retryFirst, then twice as
// late each time, up to RetryMax. When it returns, the connections kept
// for the next round are closed (Close).
func (p *Peers) Run(ctx context.Context) {
	defer p.Close()
	p.sched.run(ctx, p.cfg.Interval, func() { _, _ = p.checkNow(ctx) })
}

// Close closes the connections kept to the sampled peers; rounds after it
// keep none (each closes its connections when it ends).
func (p *Peers) Close() { p.pool.close() }

// RecheckWhile makes Run re-check, as while a verdict keeps the node out
// (after retryFirst, doubling up to RetryMax), for as long as f reports
// true: the jump guard asks this while it holds a forward jump that only a
// new measurement can confirm. A round started with checkNow wakes Run to
// look at f again. nil stops it.
func (p *Peers) RecheckWhile(f func() bool) { p.sched.recheckWhile(f) }

// peerRound is what a round measured: the sample it decided on, and the
// first sample's figures when that was a confirmation.
type peerRound struct {
	live    int
	results []PeerResult // the deciding sample's
	// wide: the round re-checked a verdict that kept the node out, with
	// wide samples.
	wide bool
	// confirmed: results are a confirmation sample's; first describes the
	// first sample, which found the node the outlier (with wide: which did
	// not), and firstUnreachable counts the peers it could not reach.
	confirmed        bool
	first            string
	firstSize        int
	firstUnreachable int
}

// checkNow does one round: it lists the live peers, asks a sample of them
// for their time (concurrently, each bounded by Timeout), takes the median
// offset of those that answered and passes or fails peer_offset; a sample
// that finds the node the outlier and did not cover every live peer is
// confirmed by a second, fresh sample first. While the last verdict found
// the node the outlier, the samples are wide (4 × Sample), and it is a
// wide sample that does not find the node the outlier, when it did not
// cover every live peer, that a second wide one must confirm. No peers,
// or none reachable, passes. When the source fails, the earlier verdict
// stays (a first round passes). It returns the snapshot after the round, and an error wrapping
// errPeerOffset when the node is the outlier, the source's error when it
// failed, or ctx's error when ctx ended first (then no verdict is given).
func (p *Peers) checkNow(ctx context.Context) (PeerSnapshot, error) {
	if err := p.round.LockCtx(ctx); err != nil {
		return p.Snapshot(), fmt.Errorf("peer check: %w", err)
	}
	defer p.round.Unlock()

	ids, err := p.src.PeerIDs(ctx)
	if ctxErr := ctx.Err(); ctxErr != nil {
		return p.Snapshot(), fmt.Errorf("peer check: %w", ctxErr)
	}
	if err != nil {
		return p.judgeSourceError(fmt.Errorf("list peers: %w", err))
	}
	live := sortedUnique(ids)
	began := p.clk.Mono()
	wide := p.out
	var sample []int64
	if wide {
		sample = p.sampler.nextWide(live)
	} else {
		sample = p.sampler.next(live)
	}
	p.pool.retain(sample)
	results, err := p.askSample(ctx, sample)
	if ctxErr := ctx.Err(); ctxErr != nil {
		return p.Snapshot(), fmt.Errorf("peer check: %w", ctxErr)
	}
	if err != nil {
		return p.judgeSourceError(fmt.Errorf("resolve the sample's addresses: %w", err))
	}
	round := peerRound{live: len(live), results: results, wide: wide}
	// A sample that did not cover every live peer settles a change of the
	// verdict only with a confirmation: leaving (it found the outlier) as
	// returning (a wide one did not).
	if _, _, _, out, _ := tally(results); out != wide && len(sample) < len(live) {
		round, err = p.confirm(ctx, live, round)
		if ctxErr := ctx.Err(); ctxErr != nil {
			return p.Snapshot(), fmt.Errorf("peer check: %w", ctxErr)
		}
		if err != nil {
			return p.judgeSourceError(fmt.Errorf("resolve the confirmation sample's addresses: %w", err))
		}
	}
	return p.judge(round, began)
}

// confirm asks a second, fresh sample after round's first found the node
// the outlier, or a wide one did not (its peers outside the first where
// the cluster has enough), and returns the round with the second as the
// deciding sample.
func (p *Peers) confirm(ctx context.Context, live []int64, round peerRound) (peerRound, error) {
	agree, disagree, unsure, _, _ := tally(round.results)
	firstDetail := p.offsetDetail(round.results, agree, disagree, unsure, !round.wide)
	unreachable := 0
	for _, r := range round.results {
		if !r.Reachable() {
			unreachable++
		}
	}
	second := p.sampler.confirmation(live, peerResultIDs(round.results), round.wide)
	results, err := p.askSample(ctx, second)
	if err != nil {
		return round, err
	}
	return peerRound{live: round.live, results: results, wide: round.wide, confirmed: true,
		first: firstDetail, firstSize: len(round.results), firstUnreachable: unreachable}, nil
}

// peerResultIDs returns the worker IDs of results, sorted.
func peerResultIDs(results []PeerResult) []int64 {
	ids := make([]int64, 0, len(results))
	for _, r := range results {
		ids = append(ids, r.WorkerID)
	}
	slices.Sort(ids)
	return ids
}

// sample sends one GET /time on conn and reads the answer (net/http's
// parser, over the connection the round dialled); last asks the peer to
// close the connection after it. closing reports that the peer will close
// it (its answer said Connection: close).
func (p *Peers) sample(conn net.Conn, br *bufio.Reader, host string, last bool) (rtt, offset time.Duration, closing bool, err error) {
	closeHdr := ""
	if last {
		closeHdr = "Connection: close\r\n"
	}
	req := "GET " + peerTimePath + " HTTP/1.1\r\nHost: " + host + "\r\nUser-Agent: snowflaked-peer-check\r\n" + closeHdr + "\r\n"
	// The wall reading is bracketed by monotonic ones and the round trip
	// starts at the first: a pause between reading the wall clock and
	// sending would otherwise shift the offset without widening the round
	// trip (and the lowest round trip would prefer such a sample).
	m0, sendWall, _ := bracket(p.clk)
	if _, err := conn.Write([]byte(req)); err != nil {
		return 0, 0, true, err
	}
	body, closing, status, err := readTimeAnswer(br)
	m1 := p.clk.Mono()
	if err != nil {
		return 0, 0, true, err
	}
	if status != http.StatusOK {
		return 0, 0, closing, fmt.Errorf("status %d", status)
	}
	peerNs, err := parsePeerTime(body)
	if err != nil {
		return 0, 0, closing, err
	}
	rtt = m1 - m0
	return rtt, time.Duration(peerNs - (sendWall + int64(rtt/2))), closing, nil
}

// readTimeAnswer reads one HTTP response to a GET from br, its body whole
// (at most maxTimeBody bytes), so the connection can carry the next request.
func readTimeAnswer(br *bufio.Reader) (body []byte, closing bool, status int, err error) {
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, true, 0, err
	}
	// On an error the body is left unread and the connection dropped (the
	// caller's closing): closing the body would drain it, for as long as a
	// peer cares to trickle an oversized answer.
	if resp.ContentLength > maxTimeBody {
		return nil, true, 0, fmt.Errorf("body of %d bytes, larger than %d", resp.ContentLength, maxTimeBody)
	}
	body, err = io.ReadAll(io.LimitReader(resp.Body, maxTimeBody+1))
	switch {
	case err != nil:
		return nil, true, 0, err
	case len(body) > maxTimeBody:
		return nil, true, 0, fmt.Errorf("body larger than %d bytes", maxTimeBody)
	}
	_ = resp.Body.Close() // read to its end: nothing left to drain
	return body, resp.Close, resp.StatusCode, nil
}

// peerTLS returns cfg for a connection to addr: with the peer's host as
// ServerName when cfg names none.
func peerTLS(cfg *tls.Config, addr string) *tls.Config {
	if cfg.ServerName != "" {
		return cfg
	}
	host, _, _ := net.SplitHostPort(addr)
	c := cfg.Clone()
	c.ServerName = host
	return c
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

// tally counts a round's verdicts, the node's own clock included (it
// agrees with itself), and applies the majority rule: out when a strict
// majority of the clocks compared disagrees, split when some disagree and
// neither side has a strict majority.
func tally(results []PeerResult) (agree, disagree, unsure int, out, split bool) {
	v := votes{agree: 1}
	for _, r := range results {
		v.add(r.Judged)
	}
	out = outlier(v.agree, v.disagree, v.unsure)
	split = !out && v.disagree > 0 && 2*v.agree <= v.agree+v.disagree+v.unsure
	return v.agree, v.disagree, v.unsure, out, split
}

// verdict is a round's outcome, computed from its deciding sample.
type verdict struct {
	offsets                 []time.Duration // of the reachable peers
	errs                    []string        // why each unreachable peer did not count
	agree, disagree, unsure int
	out, split              bool
	unconfirmed             bool // the first sample found the outlier, the confirmation did not
	held                    bool // wide: the first sample did not find the outlier, the confirmation did
	returned                bool // wide, and not the outlier: the node returns
	detail                  string
}

// decide computes the verdict of round.
func (p *Peers) decide(round peerRound) verdict {
	var v verdict
	for _, r := range round.results {
		if r.Reachable() {
			v.offsets = append(v.offsets, r.Offset)
		} else {
			v.errs = append(v.errs, fmt.Sprintf("worker %d %s: %s", r.WorkerID, r.Addr, r.Error))
		}
	}
	v.agree, v.disagree, v.unsure, v.out, v.split = tally(round.results)
	v.unconfirmed = round.confirmed && !round.wide && !v.out
	v.held = round.confirmed && round.wide && v.out
	v.returned = round.wide && !v.out
	if v.out || v.split {
		v.detail = p.offsetDetail(round.results, v.agree, v.disagree, v.unsure, v.out)
	}
	switch {
	case v.held:
		v.detail += fmt.Sprintf("; re-checked with wide samples: the first, of %d of %d live peers, did not find it the outlier (%s), the second, of %d, did: it stays out",
			round.firstSize, round.live, strings.TrimSuffix(round.first, ";"), len(round.results))
	case round.wide && v.out:
		v.detail += fmt.Sprintf("; re-checked with a wide sample of %d of %d live peers", len(round.results), round.live)
	case v.unconfirmed:
		v.detail = strings.TrimSuffix(fmt.Sprintf("a sample of %d of %d live peers found this node the outlier (%s); a second sample of %d did not confirm it, so it stays in service; %s",
			round.firstSize, round.live, round.first, len(round.results), v.detail), "; ")
	case round.confirmed:
		v.detail += fmt.Sprintf("; confirmed by a second sample: the first (%s)", round.first)
	}
	return v
}

// judge gives the verdict for a round that began asking at began
// (monotonic).
func (p *Peers) judge(round peerRound, began time.Duration) (PeerSnapshot, error) {
	v := p.decide(round)
	var err error
	if v.out {
		err = fmt.Errorf("%w: %s", errPeerOffset, v.detail)
	}
	snap := p.record(round, v, began)
	p.out = v.out
	p.sched.ended(v.out)
	p.report(v)
	if err != nil {
		p.check.Fail(v.detail)
		return snap, err
	}
	p.check.Pass()
	return snap, nil
}

// record stores a round's figures and counts it; it returns the snapshot.
func (p *Peers) record(round peerRound, v verdict, began time.Duration) PeerSnapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.snap.LivePeers = round.live
	p.snap.Peers = round.results
	// The node's own clock is one of the clocks compared (offset 0).
	p.snap.Median = medianOf(append([]time.Duration{0}, v.offsets...))
	p.snap.Reachable = len(v.offsets)
	p.snap.Unreachable = len(v.errs)
	p.snap.Agree, p.snap.Disagree, p.snap.Unsure, p.snap.Split, p.snap.Detail = v.agree, v.disagree, v.unsure, v.split, v.detail
	p.snap.Confirmation, p.snap.FirstSample, p.snap.Wide = round.confirmed, round.first, round.wide
	p.snap.measuredMono, p.snap.measured = began, true
	p.snap.CheckedAt = clock.WallTime(p.clk)
	p.snap.SourceError = ""
	p.snap.Rounds++
	p.snap.UnreachablePeers += int64(len(v.errs) + round.firstUnreachable)
	if v.out {
		p.snap.OffsetFailures++
	}
	if v.split {
		p.snap.SplitRounds++
	}
	if round.confirmed && !round.wide {
		p.snap.Confirmations++
	}
	if v.unconfirmed {
		p.snap.Unconfirmed++
	}
	if round.wide {
		p.snap.WideRounds++
	}
	if v.held {
		p.snap.ReturnsHeld++
	}
	p.judged = true
	return p.snapshotLocked()
}

// report logs a round's unreachable peers and its disagreement, if any.
func (p *Peers) report(v verdict) {
	if len(v.errs) > 0 {
		p.cfg.Log.Warn().Int("unreachable", len(v.errs)).Int("reachable", len(v.offsets)).
			Str("errors", strings.Join(v.errs, "; ")).Msg("peers unreachable for the clock check")
	}
	if v.returned {
		p.cfg.Log.Info().Int("agree", v.agree).Int("disagree", v.disagree).Str("detail", v.detail).
			Msg("wide samples of the peers no longer find this clock the outlier: back in service")
	}
	var msg string
	switch {
	case v.out:
		msg = "clock disagrees with a majority of the peers"
	case v.unconfirmed:
		msg = "a sample of the peers found this clock the outlier, a second did not confirm it: staying in service"
	case v.split:
		msg = "clocks disagree with no majority either way: staying in service, NTP (if configured) decides"
	default:
		return
	}
	p.cfg.Log.Warn().Int("agree", v.agree).Int("disagree", v.disagree).Dur("max_offset_ms", p.cfg.MaxOffset).
		Str("detail", v.detail).Msg(msg)
}

// offsetDetail describes a round with a disagreement, with its figures.
func (p *Peers) offsetDetail(results []PeerResult, agree, disagree, unsure int, out bool) string {
	var b strings.Builder
	n := agree + disagree + unsure
	if out {
		fmt.Fprintf(&b, "clock more than %v from %d of %d clocks compared (itself counted): the outlier;", p.cfg.MaxOffset, disagree, n)
	} else {
		fmt.Fprintf(&b, "no majority: %d of %d clocks compared (itself counted) are more than %v away, %d agree;", disagree, n, p.cfg.MaxOffset, agree)
	}
	listed := 0
	for _, r := range results {
		if !r.Reachable() {
			continue
		}
		if listed == maxDetailPeers {
			fmt.Fprintf(&b, " and %d more", n-1-listed)
			break
		}
		if listed > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " worker %d %s %s (rtt %v)", r.WorkerID, r.Addr, signed(r.Offset), r.RTT)
		if r.Judged == judgedUnsure {
			b.WriteString(" unsure")
		}
		listed++
	}
	return b.String()
}

// judgeSourceError records a round without a peer list: it measured
// nothing, so the verdict stays, or passes if there was none. A verdict
// against the node that stays is re-checked soon by Run.
func (p *Peers) judgeSourceError(err error) (PeerSnapshot, error) {
	err = fmt.Errorf("peer check: %w", err)
	p.mu.Lock()
	p.snap.CheckedAt = clock.WallTime(p.clk)
	p.snap.SourceError = err.Error()
	p.snap.Rounds++
	p.snap.SourceErrors++
	judged, out := p.judged, p.snap.outlier()
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
