package clockguard

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/tests/ntpharness"

	"codeberg.org/snowflaked/snowflaked/internal/health"
)

// shiftedClock is the system clock with its wall time moved by shift, as the
// chaos build's clock is; the monotonic clock is untouched.
type shiftedClock struct {
	*clock.System
	shift time.Duration
}

func (c shiftedClock) WallNanos() int64 { return c.System.WallNanos() + int64(c.shift) }

func newRealNTP(t *testing.T, g *health.Guard, c clock.Clock, cfg NTPConfig) *NTP {
	t.Helper()
	if cfg.Timeout == 0 {
		cfg.Timeout = time.Second
	}
	cfg.Log = testLogger(t)
	n, err := NewNTP(g, c, cfg)
	if err != nil {
		t.Fatalf("NewNTP: %v", err)
	}
	return n
}

// requireNear fails unless got is within tol of want.
func requireNear(t *testing.T, what string, got, want, tol time.Duration) {
	t.Helper()
	if d := got - want; d < -tol || d > tol {
		t.Fatalf("%s = %v, want %v ± %v", what, got, want, tol)
	}
}

// TestIntegration_NTPFakeServerInAndOut: a server 2s ahead takes the node
// out of service; back at 0 it returns, driven by Run's own interval.
func TestIntegration_NTPFakeServerInAndOut(t *testing.T) {
	srv := ntpharness.StartFake(t)
	g := newGuard(t)
	n := newRealNTP(t, g, clock.NewSystem(), NTPConfig{Servers: []string{srv.Addr()}, Interval: 20 * time.Millisecond})
	stop := runInBackground(t, n.Run)

	waitFor(t, "in service with the server at offset 0", g.Ready)
	srv.SetOffset(2 * time.Second)
	waitFor(t, "out of service with the server 2s ahead", func() bool { return g.Status().Reason == health.ReasonNTPOffset })
	d, _ := failingDetail(g, health.ReasonNTPOffset)
	if !strings.HasPrefix(d, "offset +") || !strings.Contains(d, srv.Addr()) {
		t.Fatalf("ntp_offset detail = %q, want the +2s offset and the server", d)
	}
	// The figure is not rounded (+1.999768251s is right): parse and compare it.
	shown, err := time.ParseDuration(strings.TrimPrefix(strings.Fields(d)[1], "+"))
	if err != nil {
		t.Fatalf("ntp_offset detail = %q: no duration after \"offset\": %v", d, err)
	}
	requireNear(t, "offset in the detail", shown, 2*time.Second, 100*time.Millisecond)
	s := n.Snapshot()
	requireNear(t, "snapshot offset", s.Last.Offset, 2*time.Second, 100*time.Millisecond)
	if s.Last.Server != srv.Addr() || s.Last.Stratum != 2 || s.OffsetFailures < 1 {
		t.Fatalf("snapshot = %+v, last %+v", s, *s.Last)
	}
	srv.SetOffset(0)
	waitFor(t, "back in service with the server at 0", g.Ready)
	requireNear(t, "snapshot offset", n.Snapshot().Last.Offset, 0, 100*time.Millisecond)
	stop()
}

// TestIntegration_NTPInjectedClockShift: the node's clock (not the system's)
// is what is measured: a node clock 2s ahead sees a server at 0 as -2s.
func TestIntegration_NTPInjectedClockShift(t *testing.T) {
	srv := ntpharness.StartFake(t)
	g := newGuard(t)
	n := newRealNTP(t, g, shiftedClock{System: clock.NewSystem(), shift: 2 * time.Second},
		NTPConfig{Servers: []string{srv.Addr()}})
	res, err := n.checkNow(context.Background())
	if !errors.Is(err, errNTPOffset) {
		t.Fatalf("checkNow = %v, want errNTPOffset", err)
	}
	requireNear(t, "offset", res.Offset, -2*time.Second, 100*time.Millisecond)
	if g.Ready() || g.Status().Reason != health.ReasonNTPOffset {
		t.Fatalf("status %+v, want out of service for ntp_offset", g.Status())
	}
}

// TestIntegration_NTPFailoverAndUnreachable uses real UDP servers: a closed
// port, a silent server, a stratum-16 server and a good one.
func TestIntegration_NTPFailoverAndUnreachable(t *testing.T) {
	good := ntpharness.StartFake(t)
	good.SetOffset(30 * time.Millisecond)
	silent := ntpharness.StartFake(t)
	silent.SetSilent(true)
	unsynced := ntpharness.StartFake(t)
	unsynced.SetStratum(16)
	closed := closedUDPAddr(t)

	for _, tc := range []struct {
		name       string
		servers    []string
		required   bool
		wantErr    error
		wantServer string
		wantReady  bool
		wantReason health.Reason
	}{
		{"closed port then good", []string{closed, good.Addr()}, true, nil, good.Addr(), true, health.ReasonNone},
		{"silent then good", []string{silent.Addr(), good.Addr()}, true, nil, good.Addr(), true, health.ReasonNone},
		{"stratum 16 then good", []string{unsynced.Addr(), good.Addr()}, true, nil, good.Addr(), true, health.ReasonNone},
		{"all unusable, required", []string{closed, silent.Addr(), unsynced.Addr()}, true, errNTPUnreachable, "", false, health.ReasonNTPUnreachable},
		{"all unusable, not required", []string{closed, silent.Addr(), unsynced.Addr()}, false, errNTPUnreachable, "", true, health.ReasonNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGuard(t)
			n := newRealNTP(t, g, clock.NewSystem(), NTPConfig{
				Servers: tc.servers, Required: tc.required, Timeout: 300 * time.Millisecond,
			})
			res, err := n.checkNow(context.Background())
			if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Fatalf("checkNow = %v, want %v", err, tc.wantErr)
			}
			if res.Server != tc.wantServer {
				t.Fatalf("answer from %q, want %q", res.Server, tc.wantServer)
			}
			if tc.wantServer != "" {
				requireNear(t, "offset", res.Offset, 30*time.Millisecond, 20*time.Millisecond)
			}
			if st := g.Status(); g.Ready() != tc.wantReady || st.Reason != tc.wantReason {
				t.Fatalf("status %+v, want ready=%v reason %q", st, tc.wantReady, tc.wantReason)
			}
		})
	}
}

// TestIntegration_NTPQueryEndsWithContext: a query to a silent server with a
// one-hour timeout ends when its context does, whether the context ends
// before the query starts or while it waits for the answer.
func TestIntegration_NTPQueryEndsWithContext(t *testing.T) {
	srv := ntpharness.StartFake(t)
	srv.SetSilent(true)
	for _, tc := range []struct {
		name    string
		ctx     func() (context.Context, context.CancelFunc)
		wantErr error
	}{
		{"cancelled before", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}, context.Canceled},
		{"deadline while waiting", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 50*time.Millisecond)
		}, context.DeadlineExceeded},
		{"cancelled while waiting", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(50*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGuard(t)
			n := newRealNTP(t, g, clock.NewSystem(), NTPConfig{Servers: []string{srv.Addr()}, Timeout: time.Hour, Required: true})
			ctx, cancel := tc.ctx()
			defer cancel()
			errc := make(chan error, 1)
			go func() {
				_, err := n.checkNow(ctx)
				errc <- err
			}()
			select {
			case err := <-errc:
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("checkNow = %v, want %v", err, tc.wantErr)
				}
			case <-time.After(waitTimeout):
				t.Fatal("checkNow did not end with its context")
			}
			if len(g.Failing()) != 0 || n.Snapshot().Rounds != 0 {
				t.Fatalf("an interrupted round gave a verdict: %v", g.Failing())
			}
		})
	}
}

// TestIntegration_NTPChrony: a real chronyd on loopback passes.
func TestIntegration_NTPChrony(t *testing.T) {
	c := ntpharness.StartChrony(t, "")
	g := newGuard(t)
	n := newRealNTP(t, g, clock.NewSystem(), NTPConfig{Servers: []string{c.Addr()}, Required: true})
	res, err := n.checkNow(context.Background())
	if err != nil {
		t.Fatalf("checkNow against chronyd: %v", err)
	}
	requireNear(t, "offset", res.Offset, 0, 100*time.Millisecond)
	if res.Stratum != 8 || res.Server != c.Addr() || !g.Ready() {
		t.Fatalf("result %+v, ready %v; want stratum 8 (local stratum 8) from %s and in service", res, g.Ready(), c.Addr())
	}
}

// TestIntegration_NTPChronyFaketime: chronyd running 3s behind makes
// ntp_offset fail with an offset near -3s.
func TestIntegration_NTPChronyFaketime(t *testing.T) {
	c := ntpharness.StartChrony(t, "-3s")
	g := newGuard(t)
	n := newRealNTP(t, g, clock.NewSystem(), NTPConfig{Servers: []string{c.Addr()}})
	res, err := n.checkNow(context.Background())
	if !errors.Is(err, errNTPOffset) {
		t.Fatalf("checkNow = %v, want errNTPOffset", err)
	}
	requireNear(t, "offset", res.Offset, -3*time.Second, 300*time.Millisecond)
	d, failing := failingDetail(g, health.ReasonNTPOffset)
	if !failing || !strings.Contains(d, "offset -2.9") && !strings.Contains(d, "offset -3") {
		t.Fatalf("ntp_offset failing=%v detail %q, want an offset near -3s", failing, d)
	}
	if g.Ready() {
		t.Fatalf("ready with chronyd 3s off: %+v", g.Status())
	}
}

// closedUDPAddr returns a 127.0.0.1 UDP address with nothing listening.
func closedUDPAddr(t *testing.T) string {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatalf("listen UDP: %v", err)
	}
	addr := c.LocalAddr().String()
	if err := c.Close(); err != nil {
		t.Fatalf("close UDP: %v", err)
	}
	return addr
}
