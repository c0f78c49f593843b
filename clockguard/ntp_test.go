package clockguard

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/beevik/ntp"

	"codeberg.org/snowflaked/snowflaked/internal/clock/clocktest"

	"codeberg.org/snowflaked/snowflaked/internal/health"
)

// answerFunc builds a server's answer to one query.
type answerFunc func(ctx context.Context, opt ntp.QueryOptions) (*ntp.Response, error)

// fakeQuerier answers from a table of servers and records the order asked.
type fakeQuerier struct {
	mu      sync.Mutex
	answers map[string]answerFunc
	calls   []string
}

func (q *fakeQuerier) Query(ctx context.Context, address string, opt ntp.QueryOptions) (*ntp.Response, error) {
	q.mu.Lock()
	q.calls = append(q.calls, address)
	f, ok := q.answers[address]
	q.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("fake: no route to %s", address)
	}
	if opt.GetSystemTime == nil {
		return nil, errors.New("fake: GetSystemTime not set: the offset would be measured against the system clock")
	}
	return f(ctx, opt)
}

func (q *fakeQuerier) set(address string, f answerFunc) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.answers[address] = f
}

func (q *fakeQuerier) asked() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.calls)
}

// validResponse is an answer that passes Validate.
func validResponse(offset time.Duration) *ntp.Response {
	return &ntp.Response{
		ClockOffset: offset, RTT: time.Millisecond, Stratum: 2, Version: 4,
		RootDistance: 10 * time.Millisecond, Leap: ntp.LeapNoWarning,
	}
}

// offsetAnswer answers with a fixed ClockOffset.
func offsetAnswer(offset time.Duration) answerFunc {
	return func(context.Context, ntp.QueryOptions) (*ntp.Response, error) { return validResponse(offset), nil }
}

// modified answers validResponse(0) changed by fn.
func modified(fn func(r *ntp.Response)) answerFunc {
	return func(context.Context, ntp.QueryOptions) (*ntp.Response, error) {
		r := validResponse(0)
		fn(r)
		return r, nil
	}
}

// errAnswer fails the query.
func errAnswer(msg string) answerFunc {
	return func(context.Context, ntp.QueryOptions) (*ntp.Response, error) { return nil, errors.New(msg) }
}

// serverAt answers as a server whose clock reads serverTime, measuring the
// local time through opt.GetSystemTime as beevik/ntp does.
func serverAt(serverTime time.Time) answerFunc {
	return func(_ context.Context, opt ntp.QueryOptions) (*ntp.Response, error) {
		return validResponse(serverTime.Sub(opt.GetSystemTime())), nil
	}
}

func newTestNTP(t *testing.T, g *health.Guard, q Querier, cfg NTPConfig) *NTP {
	t.Helper()
	cfg.Querier = q
	cfg.Log = testLogger(t)
	if cfg.MinGap == 0 {
		cfg.MinGap = time.Nanosecond // rounds back to back; TestNTPMinGap tests the gap
	}
	n, err := NewNTP(g, clocktest.NewFake(t0), cfg)
	if err != nil {
		t.Fatalf("NewNTP: %v", err)
	}
	return n
}

func TestNTPCheckNow(t *testing.T) {
	const a, b, c = "a.example:123", "b.example:123", "c.example:123"
	for _, tc := range []struct {
		name          string
		servers       []string // default: those with an answer
		required      bool
		answers       map[string]answerFunc
		wantErr       error
		wantServer    string
		wantOffset    time.Duration
		wantAsked     []string
		wantFailing   map[health.Reason]string // reason → substring of its detail
		wantServerErr int64
	}{
		{
			name:       "within max",
			answers:    map[string]answerFunc{a: offsetAnswer(100 * time.Millisecond)},
			wantServer: a, wantOffset: 100 * time.Millisecond, wantAsked: []string{a},
		},
		{
			name:       "exactly max",
			answers:    map[string]answerFunc{a: offsetAnswer(-500 * time.Millisecond)},
			wantServer: a, wantOffset: -500 * time.Millisecond, wantAsked: []string{a},
		},
		{
			name:    "beyond max ahead",
			answers: map[string]answerFunc{a: offsetAnswer(2 * time.Second)},
			wantErr: errNTPOffset, wantServer: a, wantOffset: 2 * time.Second, wantAsked: []string{a},
			wantFailing: map[health.Reason]string{health.ReasonNTPOffset: "offset +2s from a.example:123 (rtt 1ms, stratum 2), max 500ms"},
		},
		{
			name:    "beyond max behind",
			answers: map[string]answerFunc{a: offsetAnswer(-600 * time.Millisecond)},
			wantErr: errNTPOffset, wantServer: a, wantOffset: -600 * time.Millisecond, wantAsked: []string{a},
			wantFailing: map[health.Reason]string{health.ReasonNTPOffset: "offset -600ms from a.example:123"},
		},
		{
			name:       "every server asked: the median answer (of the middle two, the one nearer zero)",
			answers:    map[string]answerFunc{a: offsetAnswer(-20 * time.Millisecond), b: offsetAnswer(10 * time.Millisecond)},
			wantServer: b, wantOffset: 10 * time.Millisecond, wantAsked: []string{a, b},
		},
		{
			name:       "one wrong server of two: no majority, the node stays in",
			answers:    map[string]answerFunc{a: offsetAnswer(3 * time.Second), b: offsetAnswer(10 * time.Millisecond)},
			wantServer: b, wantOffset: 10 * time.Millisecond, wantAsked: []string{a, b},
		},
		{
			name:       "one wrong server of three, listed first: the majority agrees",
			servers:    []string{a, b, c},
			answers:    map[string]answerFunc{a: offsetAnswer(3 * time.Second), b: offsetAnswer(10 * time.Millisecond), c: offsetAnswer(0)},
			wantServer: b, wantOffset: 10 * time.Millisecond, wantAsked: []string{a, b, c},
		},
		{
			name:    "two of three beyond: out",
			servers: []string{a, b, c},
			answers: map[string]answerFunc{a: offsetAnswer(3 * time.Second), b: offsetAnswer(2 * time.Second), c: offsetAnswer(0)},
			wantErr: errNTPOffset, wantServer: b, wantOffset: 2 * time.Second, wantAsked: []string{a, b, c},
			wantFailing: map[health.Reason]string{health.ReasonNTPOffset: "2 of 3 servers put the clock more than 500ms off; median offset +2s from b.example:123"},
		},
		{
			name:    "two of three beyond, the third unreachable: out",
			servers: []string{a, b, c},
			answers: map[string]answerFunc{a: offsetAnswer(3 * time.Second), b: offsetAnswer(2 * time.Second), c: errAnswer("refused")},
			wantErr: errNTPOffset, wantServer: b, wantOffset: 2 * time.Second, wantAsked: []string{a, b, c}, wantServerErr: 1,
			wantFailing: map[health.Reason]string{health.ReasonNTPOffset: "2 of 2 servers"},
		},
		{
			name: "beyond by less than half the round trip: unsure, no verdict (a first round passes)",
			answers: map[string]answerFunc{
				a: modified(func(r *ntp.Response) { r.ClockOffset, r.RTT = 600*time.Millisecond, 300*time.Millisecond }),
			},
			servers:    []string{a},
			wantServer: a, wantOffset: 600 * time.Millisecond, wantAsked: []string{a},
		},
		{
			name:       "failover on a network error",
			answers:    map[string]answerFunc{a: errAnswer("i/o timeout"), b: offsetAnswer(10 * time.Millisecond)},
			wantServer: b, wantOffset: 10 * time.Millisecond, wantAsked: []string{a, b}, wantServerErr: 1,
		},
		{
			name: "failover on a validate failure",
			answers: map[string]answerFunc{
				a: modified(func(r *ntp.Response) { r.Stratum = 16 }), b: offsetAnswer(0),
			},
			wantServer: b, wantAsked: []string{a, b}, wantServerErr: 1,
		},
		{
			name: "failover on a kiss of death",
			answers: map[string]answerFunc{
				a: modified(func(r *ntp.Response) { r.Stratum = 0 }), b: offsetAnswer(0),
			},
			wantServer: b, wantAsked: []string{a, b}, wantServerErr: 1,
		},
		{
			name: "failover on a large root distance",
			answers: map[string]answerFunc{
				a: modified(func(r *ntp.Response) { r.RootDistance = time.Second }), b: offsetAnswer(0),
			},
			wantServer: b, wantAsked: []string{a, b}, wantServerErr: 1,
		},
		{
			name:       "one of two servers unreachable, the other beyond max: not a majority of the servers, stays in",
			answers:    map[string]answerFunc{a: errAnswer("refused"), b: offsetAnswer(3 * time.Second)},
			wantServer: b, wantOffset: 3 * time.Second, wantAsked: []string{a, b}, wantServerErr: 1,
		},
		{
			name:    "one wrong server of three while the others give no usable answer: stays in",
			servers: []string{a, b, c},
			answers: map[string]answerFunc{
				a: offsetAnswer(2 * time.Second), b: errAnswer("i/o timeout"),
				c: modified(func(r *ntp.Response) { r.Stratum = 0 }), // a kiss of death
			},
			wantServer: a, wantOffset: 2 * time.Second, wantAsked: []string{a, b, c}, wantServerErr: 2,
		},
		{
			name:    "the only server configured, beyond max: it decides",
			servers: []string{b},
			answers: map[string]answerFunc{b: offsetAnswer(3 * time.Second)},
			wantErr: errNTPOffset, wantServer: b, wantOffset: 3 * time.Second, wantAsked: []string{b},
			wantFailing: map[health.Reason]string{health.ReasonNTPOffset: "offset +3s from b.example:123"},
		},
		{
			name:    "unreachable, not required",
			answers: map[string]answerFunc{a: errAnswer("refused"), b: errAnswer("i/o timeout")},
			wantErr: errNTPUnreachable, wantAsked: []string{a, b}, wantServerErr: 2,
		},
		{
			name:     "unreachable, required",
			required: true,
			answers:  map[string]answerFunc{a: errAnswer("refused"), b: errAnswer("i/o timeout")},
			wantErr:  errNTPUnreachable, wantAsked: []string{a, b}, wantServerErr: 2,
			wantFailing: map[health.Reason]string{health.ReasonNTPUnreachable: "a.example:123: refused; b.example:123: i/o timeout"},
		},
		{
			name:     "only invalid answers, required",
			required: true,
			answers: map[string]answerFunc{
				a: modified(func(r *ntp.Response) { r.Leap = ntp.LeapNotInSync }),
				b: modified(func(r *ntp.Response) { r.Stratum = 16 }),
			},
			wantErr: errNTPUnreachable, wantAsked: []string{a, b}, wantServerErr: 2,
			wantFailing: map[health.Reason]string{health.ReasonNTPUnreachable: "invalid answer (stratum 16"},
		},
		{
			name: "only invalid answers, not required",
			answers: map[string]answerFunc{
				a: modified(func(r *ntp.Response) { r.Stratum = 16 }),
				b: modified(func(r *ntp.Response) { r.Stratum = 16 }),
			},
			wantErr: errNTPUnreachable, wantAsked: []string{a, b}, wantServerErr: 2,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGuard(t)
			q := &fakeQuerier{answers: tc.answers}
			servers := tc.servers
			if servers == nil {
				servers = slices.Sorted(maps.Keys(tc.answers))
			}
			n := newTestNTP(t, g, q, NTPConfig{Servers: servers, Required: tc.required})
			if g.Status().State != health.Starting {
				t.Fatalf("before the first round: %+v, want starting", g.Status())
			}
			res, err := n.checkNow(context.Background())
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("checkNow error = %v, want %v", err, tc.wantErr)
			}
			if res.Server != tc.wantServer || res.Offset != tc.wantOffset {
				t.Fatalf("result = %+v, want server %q offset %v", res, tc.wantServer, tc.wantOffset)
			}
			if got := q.asked(); !slices.Equal(slices.Sorted(slices.Values(got)), tc.wantAsked) {
				t.Fatalf("servers asked = %v, want %v", got, tc.wantAsked)
			}
			failing := g.Failing()
			if len(failing) != len(tc.wantFailing) {
				t.Fatalf("failing checks = %v, want %v", failing, tc.wantFailing)
			}
			for reason, sub := range tc.wantFailing {
				if !strings.Contains(failing[reason], sub) {
					t.Fatalf("%s detail = %q, want it to contain %q", reason, failing[reason], sub)
				}
			}
			if wantReady := len(tc.wantFailing) == 0; g.Ready() != wantReady {
				t.Fatalf("ready = %v, want %v (status %+v)", g.Ready(), wantReady, g.Status())
			}
			s := n.Snapshot()
			if s.ServerErrors != tc.wantServerErr || s.Rounds != 1 {
				t.Fatalf("snapshot counters %+v, want 1 round and %d server errors", s, tc.wantServerErr)
			}
			if tc.wantServer != "" && !strings.Contains(s.LastError, "precise") && (s.Last == nil || *s.Last != res) {
				t.Fatalf("snapshot last = %+v, want %+v", s.Last, res)
			}
		})
	}
}

// TestNTPMeasuresInjectedClock: the offset is measured against the node's
// clock (a chaos build shifts it), not the system clock.
func TestNTPMeasuresInjectedClock(t *testing.T) {
	g := newGuard(t)
	fc := clocktest.NewFake(t0)
	q := &fakeQuerier{answers: map[string]answerFunc{"ntp.example:123": serverAt(t0)}}
	n, err := NewNTP(g, fc, NTPConfig{Servers: []string{"ntp.example"}, Querier: q, Log: testLogger(t), MinGap: time.Nanosecond})
	if err != nil {
		t.Fatalf("NewNTP: %v", err)
	}
	for _, tc := range []struct {
		step       time.Duration
		wantOffset time.Duration
		wantErr    error
	}{
		{0, 0, nil},
		{-3 * time.Second, 3 * time.Second, errNTPOffset}, // node clock stepped back: the server is 3s ahead
		{3*time.Second + 200*time.Millisecond, -200 * time.Millisecond, nil},
	} {
		fc.StepWall(tc.step)
		res, err := n.checkNow(context.Background())
		if res.Offset != tc.wantOffset || !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
			t.Fatalf("after stepping the node's clock by %v: offset %v, err %v; want %v, %v",
				tc.step, res.Offset, err, tc.wantOffset, tc.wantErr)
		}
		if want := time.Unix(0, fc.WallNanos()); !res.CheckedAt.Equal(want) {
			t.Fatalf("CheckedAt = %v, want the node's clock %v", res.CheckedAt, want)
		}
	}
}

// TestNTPUnreachableKeepsOffsetVerdict: losing the servers does not clear a
// known offset failure; a good answer does.
func TestNTPUnreachableKeepsOffsetVerdict(t *testing.T) {
	const a = "a.example:123"
	g := newGuard(t)
	q := &fakeQuerier{answers: map[string]answerFunc{a: offsetAnswer(2 * time.Second)}}
	n := newTestNTP(t, g, q, NTPConfig{Servers: []string{a}})
	steps := []struct {
		answer    answerFunc
		wantErr   error
		wantReady bool
	}{
		{offsetAnswer(2 * time.Second), errNTPOffset, false},
		{errAnswer("i/o timeout"), errNTPUnreachable, false},
		{offsetAnswer(time.Millisecond), nil, true},
		{errAnswer("i/o timeout"), errNTPUnreachable, true},
	}
	for i, st := range steps {
		q.set(a, st.answer)
		_, err := n.checkNow(context.Background())
		if !errors.Is(err, st.wantErr) || (err == nil) != (st.wantErr == nil) || g.Ready() != st.wantReady {
			t.Fatalf("round %d: err %v ready %v; want %v, %v (status %+v)", i+1, err, g.Ready(), st.wantErr, st.wantReady, g.Status())
		}
	}
	s := n.Snapshot()
	want := NTPSnapshot{
		Enabled: true, Servers: []string{a}, MaxOffset: DefaultNTPMaxOffset,
		Rounds: 4, OffsetFailures: 1, UnreachableRounds: 2, ServerErrors: 2,
	}
	if s.Last == nil || s.Last.Offset != time.Millisecond || s.Last.Server != a || s.Last.Stratum != 2 || s.Last.RTT != time.Millisecond {
		t.Fatalf("snapshot last = %+v, want the 1ms answer from %s kept", s.Last, a)
	}
	if !strings.Contains(s.LastError, "i/o timeout") || s.LastRoundAt.IsZero() {
		t.Fatalf("snapshot last error %q at %v", s.LastError, s.LastRoundAt)
	}
	s.Last, s.Answers, s.LastError, s.LastRoundAt = nil, nil, "", time.Time{}
	if fmt.Sprint(s) != fmt.Sprint(want) {
		t.Fatalf("snapshot = %+v\nwant       %+v", s, want)
	}
	if n := g.Transitions()[health.ReasonNTPOffset]; n != 1 {
		t.Fatalf("transitions to ntp_offset = %d, want 1", n)
	}
}

func TestNTPDisabled(t *testing.T) {
	g := newGuard(t)
	q := &fakeQuerier{answers: map[string]answerFunc{}}
	n := newTestNTP(t, g, q, NTPConfig{Required: true})
	if !g.Ready() {
		t.Fatalf("NTP disabled but guard not ready: %+v", g.Status())
	}
	res, err := n.checkNow(context.Background())
	if err != nil || res != (NTPResult{}) {
		t.Fatalf("checkNow = %+v, %v; want zero, nil", res, err)
	}
	done := make(chan struct{})
	go func() { n.Run(context.Background()); close(done) }()
	select {
	case <-done:
	case <-time.After(waitTimeout):
		t.Fatal("Run of a disabled check did not return")
	}
	if s := n.Snapshot(); s.Enabled || s.Rounds != 0 || len(q.asked()) != 0 || n.Enabled() {
		t.Fatalf("disabled check did something: %+v, asked %v", s, q.asked())
	}
}

func TestNTPRunFirstRoundAtOnceThenEveryInterval(t *testing.T) {
	const a = "a.example:123"
	for _, tc := range []struct {
		name      string
		interval  time.Duration
		wantCalls int
	}{
		{"first round at once (interval 1h)", time.Hour, 1},
		{"then every interval (1ms)", time.Millisecond, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGuard(t)
			q := &fakeQuerier{answers: map[string]answerFunc{a: offsetAnswer(0)}}
			n := newTestNTP(t, g, q, NTPConfig{Servers: []string{a}, Interval: tc.interval})
			stop := runInBackground(t, n.Run)
			waitFor(t, fmt.Sprintf("%d rounds", tc.wantCalls), func() bool { return len(q.asked()) >= tc.wantCalls })
			// The server is asked before the round's verdict is applied:
			// wait for the verdict rather than read it at once.
			waitFor(t, "ready after a passing round", g.Ready)
			stop()
		})
	}
}

// TestNTPRunStopsDuringQuery: a query blocked on the network ends with ctx,
// and an interrupted round gives no verdict.
func TestNTPRunStopsDuringQuery(t *testing.T) {
	const a = "a.example:123"
	g := newGuard(t)
	started := make(chan struct{}, 1)
	q := &fakeQuerier{answers: map[string]answerFunc{a: func(ctx context.Context, _ ntp.QueryOptions) (*ntp.Response, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	}}}
	n := newTestNTP(t, g, q, NTPConfig{Servers: []string{a}, Required: true})
	stop := runInBackground(t, n.Run)
	select {
	case <-started:
	case <-time.After(waitTimeout):
		t.Fatal("first round did not start")
	}
	stop()
	if st := g.Status(); st.State != health.Starting || len(g.Failing()) != 0 {
		t.Fatalf("an interrupted round gave a verdict: %+v, failing %v", st, g.Failing())
	}
	if s := n.Snapshot(); s.Rounds != 0 {
		t.Fatalf("interrupted round counted: %+v", s)
	}
}

func TestNewNTPConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  NTPConfig
	}{
		{"empty server", NTPConfig{Servers: []string{"a.example", " "}}},
		{"port 0", NTPConfig{Servers: []string{"a.example:0"}}},
		{"port too big", NTPConfig{Servers: []string{"a.example:70000"}}},
		{"port not a number", NTPConfig{Servers: []string{"a.example:ntp"}}},
		{"no host", NTPConfig{Servers: []string{":123"}}},
		{"too many colons", NTPConfig{Servers: []string{"a:b:c"}}},
		{"negative interval", NTPConfig{Interval: -time.Second}},
		{"negative max offset", NTPConfig{MaxOffset: -time.Second}},
		{"negative root distance", NTPConfig{MaxRootDistance: -time.Second}},
		{"negative timeout", NTPConfig{Timeout: -time.Second}},
		{"negative min gap", NTPConfig{MinGap: -time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := NewNTP(newGuard(t), clocktest.NewFake(t0), tc.cfg)
			if !errors.Is(err, errBadConfig) || n != nil {
				t.Fatalf("NewNTP = %v, %v; want nil, ErrBadConfig", n, err)
			}
		})
	}
	if _, err := NewNTP(newGuard(t), nil, NTPConfig{}); !errors.Is(err, errBadConfig) {
		t.Fatalf("NewNTP with a nil clock: %v, want ErrBadConfig", err)
	}
}

func TestNTPDefaults(t *testing.T) {
	n, err := NewNTP(newGuard(t), clocktest.NewFake(t0), NTPConfig{Servers: []string{"a.example"}})
	if err != nil {
		t.Fatalf("NewNTP: %v", err)
	}
	c := n.cfg
	if c.Interval != DefaultNTPInterval || c.MaxOffset != DefaultNTPMaxOffset || c.Timeout != defaultNTPTimeout ||
		c.MaxRootDistance != DefaultNTPMaxOffset/2 || c.Querier != (udpQuerier{}) || c.Required {
		t.Fatalf("defaults not applied: %+v", c)
	}
}

func TestNormalizeNTPServer(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"pool.ntp.org", "pool.ntp.org:123"},
		{" pool.ntp.org:1123 ", "pool.ntp.org:1123"},
		{"127.0.0.1", "127.0.0.1:123"},
		{"127.0.0.1:11123", "127.0.0.1:11123"},
		{"::1", "[::1]:123"},
		{"[::1]", "[::1]:123"},
		{"[::1]:11123", "[::1]:11123"},
	} {
		got, err := normalizeNTPServer(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("NormalizeNTPServer(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// TestNTPRunRetriesAStaleVerdictAgainstTheNode: with an hour's interval, a
// round that finds no server while what keeps the node out can only change
// with an answer (an ntp_offset verdict against it, or ntp_unreachable when
// required) is retried soon; an unreachable round with a passing verdict
// and NTP optional is not.
func TestNTPRunRechecksAVerdictAgainstTheNode(t *testing.T) {
	const a = "a.example:123"
	for _, tc := range []struct {
		name      string
		required  bool
		first     answerFunc // the answer until the cause goes
		wantReady bool       // after the first round
	}{
		{"a fresh offset verdict against the node: re-checked until the clock is right", false, offsetAnswer(2 * time.Second), false},
		{"required and unreachable: re-checked until a server answers", true, errAnswer("i/o timeout"), false},
		{"passing and optional: not re-checked", false, offsetAnswer(0), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGuard(t)
			q := &fakeQuerier{answers: map[string]answerFunc{a: tc.first}}
			n := newTestNTP(t, g, q, NTPConfig{Servers: []string{a}, Interval: time.Hour, Required: tc.required})
			stop := runInBackground(t, n.Run)
			t.Cleanup(stop)
			waitFor(t, "the first round", func() bool { return n.Snapshot().Rounds >= 1 })
			if g.Ready() != tc.wantReady {
				t.Fatalf("ready %v after the first round, want %v: %+v", g.Ready(), tc.wantReady, g.Status())
			}
			if tc.wantReady {
				time.Sleep(4 * retryFirst)
				if got := len(q.asked()); got != 1 {
					t.Fatalf("%d queries in %v with an hour's interval, want 1", got, 4*retryFirst)
				}
				return
			}
			waitFor(t, "a re-check", func() bool { return n.Snapshot().Rounds >= 2 })
			q.set(a, offsetAnswer(time.Millisecond))
			waitFor(t, "the node back in", g.Ready)
		})
	}
}

// TestNTPMeasuredSince: a confirmation counts only when measured after the
// event; a round with no usable answer, or only answers too imprecise to
// judge, measured nothing.
func TestNTPMeasuredSince(t *testing.T) {
	const a = "a.example:123"
	g := newGuard(t)
	fc := clocktest.NewFake(t0)
	q := &fakeQuerier{answers: map[string]answerFunc{a: offsetAnswer(0)}}
	n, err := NewNTP(g, fc, NTPConfig{Servers: []string{a}, Querier: q, Log: testLogger(t), MinGap: time.Nanosecond})
	if err != nil {
		t.Fatalf("NewNTP: %v", err)
	}
	if _, err := n.checkNow(context.Background()); err != nil {
		t.Fatalf("checkNow: %v", err)
	}
	fc.Advance(time.Second)
	event := fc.Mono()
	if s := n.Snapshot(); !s.measuredSince(0) || s.measuredSince(event) || !s.Agrees() {
		t.Fatalf("after a good round before the event: %+v", s)
	}
	for _, step := range []struct {
		name        string
		answer      answerFunc
		want, agree bool
	}{
		{"no usable answer", errAnswer("i/o timeout"), false, false},
		{"too imprecise", modified(func(r *ntp.Response) { r.ClockOffset, r.RTT = 600*time.Millisecond, 300*time.Millisecond }), false, false},
		{"beyond the limit", offsetAnswer(2 * time.Second), true, false},
		{"within", offsetAnswer(time.Millisecond), true, true},
	} {
		q.set(a, step.answer)
		_, _ = n.checkNow(context.Background())
		s := n.Snapshot()
		if s.measuredSince(event) != step.want || (step.want && s.Agrees() != step.agree) {
			t.Fatalf("%s after the event: measured %v agrees %v, want %v, %v", step.name, s.measuredSince(event), s.Agrees(), step.want, step.agree)
		}
	}
}

// TestNTPMinGap: a server is never asked twice within MinGap (NTP servers
// drop or refuse with a kiss of death queries closer than about 2s): a
// round that comes sooner, a re-check or a jump guard's re-ask, waits; one
// that gives up first asks nothing. In a synctest bubble: virtual time,
// exact gaps.
func TestNTPMinGap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const a, gap = "a.example:123", 2 * time.Second
		var mu sync.Mutex
		var at []time.Time
		q := &fakeQuerier{answers: map[string]answerFunc{a: func(context.Context, ntp.QueryOptions) (*ntp.Response, error) {
			mu.Lock()
			at = append(at, time.Now())
			mu.Unlock()
			return validResponse(0), nil
		}}}
		n := newTestNTP(t, newGuard(t), q, NTPConfig{Servers: []string{a}, MinGap: gap})
		for range 3 {
			if _, err := n.checkNow(context.Background()); err != nil {
				t.Fatalf("checkNow: %v", err)
			}
		}
		for i := 1; i < len(at); i++ {
			if d := at[i].Sub(at[i-1]); d != gap {
				t.Fatalf("query %d came %v after the one before, want %v", i+1, d, gap)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), gap/10)
		defer cancel()
		if _, err := n.checkNow(ctx); !errors.Is(err, context.DeadlineExceeded) || len(q.asked()) != 3 {
			t.Fatalf("a round whose ctx ends within the gap: %v after %d queries, want the deadline and 3", err, len(q.asked()))
		}
	})
	if n, err := NewNTP(newGuard(t), clocktest.NewFake(t0), NTPConfig{Servers: []string{"a.example"}, Interval: 500 * time.Millisecond}); err != nil || n.cfg.MinGap != 500*time.Millisecond {
		t.Fatalf("default gap with a 500ms interval: %v; want the interval", err)
	}
}
