package clockguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/beevik/ntp"
	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/clock"
)

// NTP check defaults.
const (
	DefaultNTPInterval  = 60 * time.Second
	DefaultNTPMaxOffset = 500 * time.Millisecond
	DefaultNTPTimeout   = 2 * time.Second
	// DefaultNTPPort is used for a server given without a port.
	DefaultNTPPort = "123"
)

// Errors returned by NTP.CheckNow; callers branch on them with errors.Is.
var (
	// ErrNTPOffset: the server answered, but the clock is off by more than
	// the allowed offset.
	ErrNTPOffset = errors.New("ntp offset beyond the maximum")
	// ErrNTPUnreachable: no server gave a usable answer.
	ErrNTPUnreachable = errors.New("no NTP server gave a usable answer")
)

// Querier asks one NTP server for the time. UDPQuerier is the real one;
// tests inject their own.
type Querier interface {
	// Query asks address ("host:port") once with opt and returns the raw
	// response; it must give up when ctx ends. Validation is the caller's.
	Query(ctx context.Context, address string, opt ntp.QueryOptions) (*ntp.Response, error)
}

// UDPQuerier queries NTP servers over UDP with beevik/ntp. A query ends at
// opt.Timeout or when ctx ends, whichever comes first.
type UDPQuerier struct{}

// Query implements Querier with ntp.QueryWithOptions, dialling with ctx and
// making the read fail as soon as ctx ends.
func (UDPQuerier) Query(ctx context.Context, address string, opt ntp.QueryOptions) (*ntp.Response, error) {
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
	// Servers are asked in order until one gives a usable answer; "host" or
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
	// Required makes an unreachable NTP take the node out of service
	// (reason ntp_unreachable); otherwise it is only logged and counted.
	Required bool
	// Querier asks the servers (default UDPQuerier).
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
	CheckedAt    time.Time     `json:"checked_at"` // the node's (injected) wall clock
}

// NTPSnapshot is what /clock and metrics show of the NTP check.
type NTPSnapshot struct {
	Enabled   bool          `json:"enabled"`
	Required  bool          `json:"required"`
	Servers   []string      `json:"servers,omitempty"`
	MaxOffset time.Duration `json:"max_offset_ns"`
	// Last is the last usable answer; nil before the first one.
	Last *NTPResult `json:"last,omitempty"`
	// LastRoundAt is when the last round ended; LastError is why it failed
	// ("" when it passed).
	LastRoundAt time.Time `json:"last_round_at,omitzero"`
	LastError   string    `json:"last_error,omitempty"`
	// Counters since the start.
	Rounds            int64 `json:"rounds"`
	OffsetFailures    int64 `json:"offset_failures"`    // rounds whose offset was beyond MaxOffset
	UnreachableRounds int64 `json:"unreachable_rounds"` // rounds where no server was usable
	ServerErrors      int64 `json:"server_errors"`      // failed queries, including failed-over ones
}

// OffsetBeyond reports whether the last usable answer put the clock more
// than MaxOffset off (the ntp_offset verdict against this node). False
// before the first answer.
func (s NTPSnapshot) OffsetBeyond() bool { return s.Last != nil && abs(s.Last.Offset) > s.MaxOffset }

// NTP is the NTP check: the ntp_offset and ntp_unreachable reasons. The
// offset is measured against the node's injected clock, so a chaos build
// that shifts the clock shows up here as it would with a real clock step.
type NTP struct {
	clk       clock.Clock
	cfg       NTPConfig
	offset    *Check
	unreach   *Check
	round     sync.Mutex // serialises rounds so verdicts land in order
	sched     *rounds
	mu        sync.Mutex
	snap      NTPSnapshot
	offJudged bool // ntp_offset has had a verdict from a usable answer
}

// NewNTP registers the ntp_offset and ntp_unreachable checks with g and
// returns the NTP check. Both start pending, so the node enters service only
// after one round passes; with no servers both pass at once. It fails on a
// nil clock, a malformed server address or a negative duration.
func NewNTP(g *Guard, c clock.Clock, cfg NTPConfig) (*NTP, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: ntp: nil clock", ErrBadConfig)
	}
	if cfg.Interval < 0 || cfg.MaxOffset < 0 || cfg.MaxRootDistance < 0 || cfg.Timeout < 0 {
		return nil, fmt.Errorf("%w: ntp: negative duration (interval %v, max offset %v, max root distance %v, timeout %v)",
			ErrBadConfig, cfg.Interval, cfg.MaxOffset, cfg.MaxRootDistance, cfg.Timeout)
	}
	servers := make([]string, 0, len(cfg.Servers))
	for _, s := range cfg.Servers {
		addr, err := NormalizeNTPServer(s)
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
		cfg.Timeout = DefaultNTPTimeout
	}
	if cfg.Querier == nil {
		cfg.Querier = UDPQuerier{}
	}
	n := &NTP{
		clk: c, cfg: cfg,
		sched:   newRounds(),
		offset:  g.Check(ReasonNTPOffset),
		unreach: g.Check(ReasonNTPUnreachable),
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

// NormalizeNTPServer checks a server address and adds port 123 when it has
// none: "pool.ntp.org" → "pool.ntp.org:123", "::1" → "[::1]:123".
func NormalizeNTPServer(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", fmt.Errorf("%w: ntp server: empty address", ErrBadConfig)
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		// No port: a bare host, a bare IPv6 address or a bracketed one.
		h := s
		if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
			h = h[1 : len(h)-1]
		}
		if strings.Contains(h, ":") && net.ParseIP(h) == nil {
			return "", fmt.Errorf("%w: ntp server %q: want host or host:port", ErrBadConfig, s)
		}
		host, port = h, DefaultNTPPort
	}
	if host == "" || strings.ContainsAny(host, "[]/ ") {
		return "", fmt.Errorf("%w: ntp server %q: bad host", ErrBadConfig, s)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return "", fmt.Errorf("%w: ntp server %q: port must be 1-65535", ErrBadConfig, s)
	}
	return net.JoinHostPort(host, port), nil
}

// Enabled reports whether any server is configured.
func (n *NTP) Enabled() bool { return len(n.cfg.Servers) > 0 }

// Run does a round at once and then one every Interval, until ctx ends;
// sooner while a round (Run's or CheckNow's) found no usable server and
// what keeps the node out (ntp_unreachable when Required, an ntp_offset
// verdict against it) can only change with an answer: after 250ms, then
// twice as late each time, up to 30s. With no servers it returns at once.
func (n *NTP) Run(ctx context.Context) {
	if !n.Enabled() {
		return
	}
	n.sched.run(ctx, n.cfg.Interval, func() { _, _ = n.CheckNow(ctx) })
}

// CheckNow does one round: it asks the servers in order until one gives an
// answer that validates and whose root distance is within bounds, then
// passes or fails ntp_offset; when none does, it fails ntp_unreachable if
// Required (else passes it) and leaves ntp_offset's earlier verdict alone
// (passing it if it had none). It returns the answer used, and an error
// wrapping ErrNTPOffset or ErrNTPUnreachable when the round failed, or ctx's
// error when ctx ended first (then no verdict is given). With no servers it
// returns a zero result and nil.
func (n *NTP) CheckNow(ctx context.Context) (NTPResult, error) {
	if !n.Enabled() {
		return NTPResult{}, nil
	}
	n.round.Lock()
	defer n.round.Unlock()

	var errs []error
	for _, server := range n.cfg.Servers {
		res, err := n.queryOne(ctx, server)
		if ctxErr := ctx.Err(); ctxErr != nil {
			return NTPResult{}, fmt.Errorf("ntp check: %w", ctxErr)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		return res, n.judgeAnswer(res, int64(len(errs)))
	}
	return NTPResult{}, n.judgeUnreachable(errs)
}

// queryOne asks one server and checks the answer.
func (n *NTP) queryOne(ctx context.Context, server string) (NTPResult, error) {
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

// judgeAnswer gives the verdicts for a usable answer after failed earlier
// servers.
func (n *NTP) judgeAnswer(res NTPResult, failed int64) error {
	var err error
	detail := fmt.Sprintf("offset %s from %s (rtt %v, stratum %d), max %v",
		signed(res.Offset), res.Server, res.RTT, res.Stratum, n.cfg.MaxOffset)
	if abs(res.Offset) > n.cfg.MaxOffset {
		err = fmt.Errorf("%w: %s", ErrNTPOffset, detail)
	}
	n.mu.Lock()
	r := res
	n.snap.Last = &r
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
	n.sched.ended(false)

	n.unreach.Pass()
	if err != nil {
		n.offset.Fail(detail)
		n.cfg.Log.Warn().Str("server", res.Server).Dur("offset", res.Offset).Dur("rtt", res.RTT).
			Uint8("stratum", res.Stratum).Dur("max_offset", n.cfg.MaxOffset).Msg("ntp offset beyond the maximum")
		return err
	}
	n.offset.Pass()
	n.cfg.Log.Debug().Str("server", res.Server).Dur("offset", res.Offset).Dur("rtt", res.RTT).
		Uint8("stratum", res.Stratum).Msg("ntp check passed")
	return nil
}

// judgeUnreachable gives the verdicts when no server was usable.
func (n *NTP) judgeUnreachable(errs []error) error {
	err := fmt.Errorf("%w (%d tried): %w", ErrNTPUnreachable, len(errs), errors.Join(errs...))
	detail := strings.ReplaceAll(err.Error(), "\n", "; ")
	n.mu.Lock()
	n.snap.LastRoundAt = clock.WallTime(n.clk)
	n.snap.Rounds++
	n.snap.UnreachableRounds++
	n.snap.ServerErrors += int64(len(errs))
	n.snap.LastError = detail
	judged := n.offJudged
	offsetOut := n.snap.OffsetBeyond()
	unreachable := n.snap.UnreachableRounds
	n.mu.Unlock()
	// Stale when what keeps the node out can only change with an answer.
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
