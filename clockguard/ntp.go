package clockguard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/beevik/ntp"
	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/ctxlock"

	"codeberg.org/snowflaked/snowflaked/internal/health"
)

// NTP check defaults.
const (
	DefaultNTPInterval  = 60 * time.Second
	DefaultNTPMaxOffset = 500 * time.Millisecond
	defaultNTPTimeout   = 2 * time.Second
	defaultNTPMinGap    = 2 * time.Second
	// defaultNTPPort is used for a server given without a port.
	defaultNTPPort = "123"
)

// Errors returned by NTP.checkNow; callers branch on them with errors.Is.
var (
	// errNTPOffset: a strict majority of the servers configured put the
	// clock off by more than the allowed offset.
	errNTPOffset = errors.New("ntp offset beyond the maximum")
	// errNTPUnreachable: no server gave a usable answer.
	errNTPUnreachable = errors.New("no NTP server gave a usable answer")
)

// Querier asks one NTP server for the time. udpQuerier is the real one;
// tests inject their own.
type Querier interface {
	// Query asks address ("host:port") once with opt and returns the raw
	// response; it must give up when ctx ends. Validation is the caller's.
	Query(ctx context.Context, address string, opt ntp.QueryOptions) (*ntp.Response, error)
}

// udpQuerier queries NTP servers over UDP with beevik/ntp. A query ends at
// opt.Timeout or when ctx ends, whichever comes first.
type udpQuerier struct{}

// Query implements Querier with ntp.QueryWithOptions, dialling with ctx and
// making the read fail as soon as ctx ends.
func (udpQuerier) Query(ctx context.Context, address string, opt ntp.QueryOptions) (*ntp.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("ntp query %s: %w", address, err)
	}
	var stop func() bool
	opt.Dialer = func(localAddress, remoteAddress string) (net.Conn, error) {
		var d net.Dialer
		if localAddress != "" {
			d.LocalAddr = &net.UDPAddr{IP: net.ParseIP(localAddress)}
		}
		conn, err := d.DialContext(ctx, "udp", remoteAddress)
		if err != nil {
			return nil, err
		}
		c := &ctxConn{Conn: conn}
		stop = context.AfterFunc(ctx, c.expire)
		return c, nil
	}
	resp, err := ntp.QueryWithOptions(address, opt)
	if stop != nil {
		stop()
	}
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, fmt.Errorf("ntp query %s: %w", address, ctxErr)
		}
		return nil, fmt.Errorf("ntp query %s: %w", address, err)
	}
	return resp, nil
}

// ctxConn is a connection whose deadline never outlives its context: once
// the context ends, every deadline is in the past, whether beevik/ntp sets
// its own before or after that.
type ctxConn struct {
	net.Conn
	mu      sync.Mutex
	expired bool
}

// pastDeadline makes pending and later I/O fail at once.
var pastDeadline = time.Unix(1, 0)

// expire puts the deadline in the past for good; called when ctx ends.
func (c *ctxConn) expire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expired = true
	_ = c.Conn.SetDeadline(pastDeadline)
}

// SetDeadline sets t, or a deadline in the past once the context has ended
// (then ctx.Err() is already set when the I/O fails).
func (c *ctxConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.expired {
		t = pastDeadline
	}
	return c.Conn.SetDeadline(t)
}

// NTPConfig configures the NTP check. Zero durations take the defaults.
type NTPConfig struct {
	// Servers are all asked in every round, at once, and their usable
	// answers combined: the clock is judged off only when a strict majority
	// of the servers configured says so, so one wrong server of several
	// cannot take a node out alone, not even while the others are
	// unreachable; a single server configured decides alone. "host" or
	// "host:port" (port 123 by default; IPv6 as "[::1]:123" or "::1").
	// Empty disables the check: both of its reasons pass at once.
	Servers []string
	// Interval between rounds (default 60s).
	Interval time.Duration
	// MaxOffset is the largest |offset| that passes (default 500ms).
	MaxOffset time.Duration
	// MaxRootDistance is the largest root distance (the answer's error
	// bound) accepted from a server; a worse answer counts as that server
	// failing (default MaxOffset/2: an answer less precise than that cannot
	// judge the offset).
	MaxRootDistance time.Duration
	// Timeout of one query to one server (default 2s).
	Timeout time.Duration
	// MinGap is the shortest time between two queries to one server
	// (default defaultNTPMinGap, or Interval when that is shorter): a
	// re-check or a jump guard's re-ask that comes sooner waits for it.
	// NTP servers drop or answer with a kiss of death queries closer than
	// about 2s (ntpd's "discard minimum").
	MinGap time.Duration
	// Required makes an unreachable NTP take the node out of service
	// (reason ntp_unreachable); otherwise it is only logged and counted.
	Required bool
	// Querier asks the servers (default udpQuerier).
	Querier Querier
	// Log receives a line per failing round.
	Log zerolog.Logger
}

// NTPResult is one usable answer.
type NTPResult struct {
	Server       string        `json:"server"`
	Offset       time.Duration `json:"offset_ns"` // add to the node's clock to get the server's time
	RTT          time.Duration `json:"rtt_ns"`
	RootDistance time.Duration `json:"root_distance_ns"`
	Stratum      uint8         `json:"stratum"`
	// Judged is this answer's verdict, with the same rule as the peers'
	// (judgedAgrees, judgedDisagrees, judgedUnsure): the true offset lies
	// within Offset ± RTT/2.
	Judged    string    `json:"judged"`
	CheckedAt time.Time `json:"checked_at"` // the node's (injected) wall clock
}

// NTPSnapshot is what /clock and metrics show of the NTP check.
type NTPSnapshot struct {
	Enabled   bool          `json:"enabled"`
	Required  bool          `json:"required"`
	Servers   []string      `json:"servers,omitempty"`
	MaxOffset time.Duration `json:"max_offset_ns"`
	// Last is the answer the last verdict rests on (of the round's usable
	// answers, the one with the median offset; with an even count the one
	// nearer zero of the middle two); nil before the first one. Answers
	// are all usable answers of that round, in the order of Servers.
	Last    *NTPResult  `json:"last,omitempty"`
	Answers []NTPResult `json:"answers,omitempty"`
	// Beyond is the last verdict from usable answers: a strict majority of
	// the servers configured put the clock more than MaxOffset off. Split:
	// some did, but not that many (the node stays in; the log says so).
	Beyond bool `json:"beyond"`
	Split  bool `json:"split,omitempty"`
	// LastRoundAt is when the last round ended; LastError is why it failed
	// ("" when it passed).
	LastRoundAt time.Time `json:"last_round_at,omitzero"`
	LastError   string    `json:"last_error,omitempty"`
	// Counters since the start.
	Rounds            int64 `json:"rounds"`
	OffsetFailures    int64 `json:"offset_failures"`    // rounds whose offset was beyond MaxOffset
	UnreachableRounds int64 `json:"unreachable_rounds"` // rounds where no server was usable
	ServerErrors      int64 `json:"server_errors"`      // failed queries, the rounds that got a verdict included

	// measuredMono is the node's monotonic clock when the round that gave
	// Last began asking.
	measuredMono time.Duration
}

// offsetBeyond reports whether the last verdict from usable answers put the
// clock more than MaxOffset off (the ntp_offset verdict against this
// node). False before the first answer.
func (s NTPSnapshot) offsetBeyond() bool { return s.Last != nil && s.Beyond }

// measuredSince reports whether the last verdict comes from a round that
// began asking at or after mono (the node's monotonic clock): a
// confirmation of an event counts only when it was measured after it. A
// round with no usable answer measured nothing.
func (s NTPSnapshot) measuredSince(mono time.Duration) bool {
	return s.Last != nil && s.measuredMono >= mono
}

// Agrees reports whether the last verdict agrees with the clock: a strict
// majority of the servers configured gave an answer within MaxOffset (its
// uncertainty counted). Like offsetBeyond, one server of several cannot
// decide it alone.
func (s NTPSnapshot) Agrees() bool {
	if s.Last == nil {
		return false
	}
	var v votes
	for _, a := range s.Answers {
		v.add(a.Judged)
	}
	return 2*v.agree > len(s.Servers)
}

// NTP is the NTP check: the ntp_offset and ntp_unreachable reasons. The
// offset is measured against the node's injected clock, so a chaos build
// that shifts the clock shows up here as it would with a real clock step.
type NTP struct {
	clk       clock.Clock
	cfg       NTPConfig
	offset    *health.Check
	unreach   *health.Check
	round     ctxlock.Mutex // serialises rounds so verdicts land in order (a round waits on the network)
	sched     *rounds
	mu        sync.Mutex
	snap      NTPSnapshot
	offJudged bool // ntp_offset has had a verdict from a usable answer

	gapMu     sync.Mutex
	lastQuery map[string]time.Time // per server, when it was last asked
}

// NewNTP registers the ntp_offset and ntp_unreachable checks with g and
// returns the NTP check. Both start pending, so the node enters service only
// after one round passes; with no servers both pass at once. It fails on a
// nil clock, a malformed server address or a negative duration.
func NewNTP(g *health.Guard, c clock.Clock, cfg NTPConfig) (*NTP, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: ntp: nil clock", errBadConfig)
	}
	if cfg.Interval < 0 || cfg.MaxOffset < 0 || cfg.MaxRootDistance < 0 || cfg.Timeout < 0 || cfg.MinGap < 0 {
		return nil, fmt.Errorf("%w: ntp: negative duration (interval %v, max offset %v, max root distance %v, timeout %v, min gap %v)",
			errBadConfig, cfg.Interval, cfg.MaxOffset, cfg.MaxRootDistance, cfg.Timeout, cfg.MinGap)
	}
	servers := make([]string, 0, len(cfg.Servers))
	for _, s := range cfg.Servers {
		addr, err := normalizeNTPServer(s)
		if err != nil {
			return nil, err
		}
		servers = append(servers, addr)
	}
	cfg.Servers = servers
	if cfg.Interval == 0 {
		cfg.Interval = DefaultNTPInterval
	}
	if cfg.MaxOffset == 0 {
		cfg.MaxOffset = DefaultNTPMaxOffset
	}
	if cfg.MaxRootDistance == 0 {
		cfg.MaxRootDistance = cfg.MaxOffset / 2
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = defaultNTPTimeout
	}
	if cfg.MinGap == 0 {
		cfg.MinGap = min(defaultNTPMinGap, cfg.Interval)
	}
	if cfg.Querier == nil {
		cfg.Querier = udpQuerier{}
	}
	n := &NTP{
		round: ctxlock.New(),
		clk:   c, cfg: cfg, lastQuery: map[string]time.Time{},
		sched:   newRounds(ntpRetryMax),
		offset:  g.Check(health.ReasonNTPOffset),
		unreach: g.Check(health.ReasonNTPUnreachable),
		snap: NTPSnapshot{
			Enabled: len(servers) > 0, Required: cfg.Required,
			Servers: servers, MaxOffset: cfg.MaxOffset,
		},
	}
	if len(servers) == 0 {
		n.offset.Pass()
		n.unreach.Pass()
	}
	return n, nil
}

// normalizeNTPServer checks a server address and adds port 123 when it has
// none: "pool.ntp.org" → "pool.ntp.org:123", "::1" → "[::1]:123".
func normalizeNTPServer(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", fmt.Errorf("%w: ntp server: empty address", errBadConfig)
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		// No port: a bare host, a bare IPv6 address or a bracketed one.
		h := s
		if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
			h = h[1 : len(h)-1]
		}
		if strings.Contains(h, ":") && net.ParseIP(h) == nil {
			return "", fmt.Errorf("%w: ntp server %q: want host or host:port", errBadConfig, s)
		}
		host, port = h, defaultNTPPort
	}
	if host == "" || strings.ContainsAny(host, "[]/ ") {
		return "", fmt.Errorf("%w: ntp server %q: bad host", errBadConfig, s)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return "", fmt.Errorf("%w: ntp server %q: port must be 1-65535", errBadConfig, s)
	}
	return net.JoinHostPort(host, port), nil
}

// Enabled reports whether any server is configured.
func (n *NTP) Enabled() bool { return len(n.cfg.Servers) > 0 }

// Run does a round at once and then one every Interval, until ctx ends;
// sooner while the verdict after a round (Run's or checkNow's) keeps the
// node out (ntp_offset, or ntp_unreachable when Required), whether that
// round found the clock off or no usable server: after retryFirst, then
// twice as late each time, up to ntpRetryMax. With no servers it returns at
// once.
func (n *NTP) Run(ctx context.Context) {
	if !n.Enabled() {
		return
	}
	n.sched.run(ctx, n.cfg.Interval, func() { _, _ = n.checkNow(ctx) })
}

// RecheckWhile makes Run re-check, as while a verdict keeps the node out
// (after retryFirst, doubling up to ntpRetryMax), for as long as f reports
// true: the jump guard asks this while it holds a forward jump that only a
// new measurement can confirm. A round started with checkNow wakes Run to
// look at f again. nil stops it.
func (n *NTP) RecheckWhile(f func() bool) { n.sched.recheckWhile(f) }

// checkNow does one round: it asks every server at once (each bounded by
// Timeout) and keeps the answers that validate and whose root distance is
// within bounds. Each usable answer agrees, disagrees or is unsure (its
// round trip too wide to tell); ntp_offset fails when the answers that
// disagree are a strict majority of the servers configured and passes
// otherwise (a disagreement short of that is flagged as split). When no
// answer is usable, it fails ntp_unreachable if Required (else passes it)
// and leaves ntp_offset's earlier verdict alone (passing it if it had
// none). It
// returns the answer the verdict rests on (Snapshot's Last), and an error
// wrapping errNTPOffset or errNTPUnreachable when the round failed, or
// ctx's error when ctx ended first (then no verdict is given). With no
// servers it returns a zero result and nil.
func (n *NTP) checkNow(ctx context.Context) (NTPResult, error) {
	if !n.Enabled() {
		return NTPResult{}, nil
	}
	if err := n.round.LockCtx(ctx); err != nil {
		return NTPResult{}, fmt.Errorf("ntp check: %w", err)
	}
	defer n.round.Unlock()

	began := n.clk.Mono()
	results := make([]NTPResult, len(n.cfg.Servers))
	errs := make([]error, len(n.cfg.Servers))
	var wg sync.WaitGroup
	for i, server := range n.cfg.Servers {
		wg.Go(func() { results[i], errs[i] = n.queryOne(ctx, server) })
	}
	wg.Wait()
	if ctxErr := ctx.Err(); ctxErr != nil {
		return NTPResult{}, fmt.Errorf("ntp check: %w", ctxErr)
	}
	var usable []NTPResult
	var failed []error
	for i := range results {
		if errs[i] != nil {
			failed = append(failed, errs[i])
			continue
		}
		results[i].Judged = judgeOffset(results[i].Offset, results[i].RTT, n.cfg.MaxOffset)
		usable = append(usable, results[i])
	}
	if len(usable) == 0 {
		return NTPResult{}, n.judgeUnreachable(failed)
	}
	return n.judgeAnswers(usable, int64(len(failed)), began)
}

// queryOne asks one server and checks the answer.
func (n *NTP) queryOne(ctx context.Context, server string) (NTPResult, error) {
	if err := n.waitGap(ctx, server); err != nil {
		return NTPResult{}, fmt.Errorf("%s: %w", server, err)
	}
	opt := ntp.QueryOptions{
		Timeout: n.cfg.Timeout,
		// Measure against the node's clock, not the system's: a chaos build
		// shifts it.
		GetSystemTime: func() time.Time { return clock.WallTime(n.clk).UTC() },
	}
	resp, err := n.cfg.Querier.Query(ctx, server, opt)
	if err != nil {
		return NTPResult{}, fmt.Errorf("%s: %w", server, err)
	}
	if resp == nil {
		return NTPResult{}, fmt.Errorf("%s: querier returned no response", server)
	}
	if err := resp.Validate(); err != nil {
		return NTPResult{}, fmt.Errorf("%s: invalid answer (stratum %d, leap %d): %w", server, resp.Stratum, resp.Leap, err)
	}
	if resp.RootDistance > n.cfg.MaxRootDistance {
		return NTPResult{}, fmt.Errorf("%s: root distance %v beyond %v", server, resp.RootDistance, n.cfg.MaxRootDistance)
	}
	return NTPResult{
		Server: server, Offset: resp.ClockOffset, RTT: resp.RTT, RootDistance: resp.RootDistance,
		Stratum: resp.Stratum, CheckedAt: clock.WallTime(n.clk),
	}, nil
}

// representative returns the answer a verdict rests on: the median offset
// of the usable answers (of the middle two, the one nearer zero).
func representative(usable []NTPResult) NTPResult {
	s := slices.Clone(usable)
	slices.SortStableFunc(s, func(a, b NTPResult) int { return cmp.Compare(a.Offset, b.Offset) })
	mid := len(s) / 2
	if len(s)%2 == 0 && abs(s[mid-1].Offset) <= abs(s[mid].Offset) {
		return s[mid-1]
	}
	return s[mid]
}

// judgeAnswers gives the verdicts for a round's usable answers (failed
// servers besides), the round having begun asking at began (monotonic).
func (n *NTP) judgeAnswers(usable []NTPResult, failed int64, began time.Duration) (NTPResult, error) {
	var v votes
	for _, a := range usable {
		v.add(a.Judged)
	}
	agree, disagree, unsure := v.agree, v.disagree, v.unsure
	if agree+disagree == 0 {
		return n.judgeUnsure(usable, failed)
	}
	total := len(usable)
	// A majority of the servers configured, not of those that answered:
	// one wrong server must not decide while the others are unreachable.
	beyond := 2*disagree > len(n.cfg.Servers)
	split := !beyond && disagree > 0
	res := representative(usable)
	detail := ntpDetail(res, usable, disagree, n.cfg.MaxOffset)
	var err error
	if beyond {
		err = fmt.Errorf("%w: %s", errNTPOffset, detail)
	}
	n.mu.Lock()
	r := res
	n.snap.Last = &r
	n.snap.Answers = usable
	n.snap.Beyond, n.snap.Split = beyond, split
	n.snap.measuredMono = began
	n.snap.LastRoundAt = res.CheckedAt
	n.snap.Rounds++
	n.snap.ServerErrors += failed
	n.snap.LastError = ""
	if err != nil {
		n.snap.OffsetFailures++
		n.snap.LastError = err.Error()
	}
	n.offJudged = true
	n.mu.Unlock()
	n.sched.ended(beyond)

	n.unreach.Pass()
	switch {
	case err != nil:
		n.offset.Fail(detail)
		n.cfg.Log.Warn().Str("server", res.Server).Dur("offset_ms", res.Offset).Dur("rtt_ms", res.RTT).
			Uint8("stratum", res.Stratum).Dur("max_offset_ms", n.cfg.MaxOffset).Int("beyond", disagree).
			Int("answers", total).Str("detail", detail).Msg("ntp offset beyond the maximum")
		return res, err
	case split:
		n.cfg.Log.Warn().Int("beyond", disagree).Int("within", agree).Int("unsure", unsure).
			Dur("max_offset_ms", n.cfg.MaxOffset).Str("detail", detail).
			Msg("ntp servers disagree with no majority either way: staying in service")
	}
	n.offset.Pass()
	n.cfg.Log.Debug().Str("server", res.Server).Dur("offset_ms", res.Offset).Dur("rtt_ms", res.RTT).
		Uint8("stratum", res.Stratum).Int("answers", total).Msg("ntp check passed")
	return res, nil
}

// waitGap waits until MinGap has passed since server was last asked (or
// ctx ends), and records this query.
func (n *NTP) waitGap(ctx context.Context, server string) error {
	n.gapMu.Lock()
	last := n.lastQuery[server]
	wait := time.Until(last.Add(n.cfg.MinGap))
	n.gapMu.Unlock()
	if !last.IsZero() && wait > 0 {
		t := clock.NewTimer(ctx, wait)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	n.gapMu.Lock()
	n.lastQuery[server] = time.Now()
	n.gapMu.Unlock()
	return nil
}

// judgeUnsure records a round whose usable answers were all unsure (each
// round trip too wide to tell the clock within or beyond the maximum): like
// a round without answers it measured nothing, so ntp_offset keeps its
// verdict (passing if it had none) and a verdict against the node is
// re-checked soon; ntp_unreachable passes (servers did answer).
func (n *NTP) judgeUnsure(usable []NTPResult, failed int64) (NTPResult, error) {
	res := representative(usable)
	detail := "no answer precise enough to judge: " + ntpDetail(res, usable, 0, n.cfg.MaxOffset)
	n.mu.Lock()
	n.snap.LastRoundAt = res.CheckedAt
	n.snap.Rounds++
	n.snap.ServerErrors += failed
	n.snap.LastError = detail
	judged, out := n.offJudged, n.snap.offsetBeyond()
	n.mu.Unlock()
	n.sched.ended(out)
	n.unreach.Pass()
	if !judged {
		n.offset.Pass()
	}
	n.cfg.Log.Warn().Str("detail", detail).Msg("ntp answers too imprecise to judge the offset: verdict kept")
	return res, nil
}

// ntpDetail describes a round's usable answers: the one the verdict rests
// on, and with several servers how many put the clock beyond the maximum
// and what each said.
func ntpDetail(res NTPResult, usable []NTPResult, beyond int, maxOffset time.Duration) string {
	one := func(a NTPResult) string {
		return fmt.Sprintf("offset %s from %s (rtt %v, stratum %d)", signed(a.Offset), a.Server, a.RTT, a.Stratum)
	}
	if len(usable) == 1 {
		return one(res) + fmt.Sprintf(", max %v", maxOffset)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d servers put the clock more than %v off; median %s:", beyond, len(usable), maxOffset, one(res))
	for i, a := range usable {
		if i > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " %s %s (%s)", a.Server, signed(a.Offset), a.Judged)
	}
	return b.String()
}

// judgeUnreachable gives the verdicts when no server was usable.
func (n *NTP) judgeUnreachable(errs []error) error {
	err := fmt.Errorf("%w (%d tried): %w", errNTPUnreachable, len(errs), errors.Join(errs...))
	detail := strings.ReplaceAll(err.Error(), "\n", "; ")
	n.mu.Lock()
	n.snap.LastRoundAt = clock.WallTime(n.clk)
	n.snap.Rounds++
	n.snap.UnreachableRounds++
	n.snap.ServerErrors += int64(len(errs))
	n.snap.LastError = detail
	judged := n.offJudged
	offsetOut := n.snap.offsetBeyond()
	unreachable := n.snap.UnreachableRounds
	n.mu.Unlock()
	// What keeps the node out can only change with an answer: re-check.
	n.sched.ended(n.cfg.Required || offsetOut)

	if n.cfg.Required {
		n.unreach.Fail(detail)
	} else {
		n.unreach.Pass()
	}
	if !judged {
		// Nothing is known about the offset. If NTP is not required the node
		// may serve; if it is, ntp_unreachable keeps it out anyway.
		n.offset.Pass()
	}
	n.cfg.Log.Warn().Bool("required", n.cfg.Required).Int64("unreachable_rounds", unreachable).
		Str("errors", detail).Msg("ntp unreachable")
	return err
}

// Snapshot returns the last usable answer and the counters.
func (n *NTP) Snapshot() NTPSnapshot {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := n.snap
	s.Servers = append([]string(nil), s.Servers...)
	s.Answers = slices.Clone(s.Answers)
	if s.Last != nil {
		r := *s.Last
		s.Last = &r
	}
	return s
}

// abs returns |d|.
func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// signed formats d with an explicit sign: "+2s", "-3ms".
func signed(d time.Duration) string {
	if d >= 0 {
		return "+" + d.String()
	}
	return d.String()
}
