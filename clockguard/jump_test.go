package clockguard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/beevik/ntp"
	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/internal/clock/clocktest"
	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
)

// fakeConfirmer answers as told; its answers are stamped with the
// monotonic clock when recheck is called (like a real round after the
// jump).
type fakeConfirmer struct {
	clk      *clocktest.Fake
	answers  bool // whether a recheck gets an answer
	agrees   bool
	answered bool          // it has answered at least once
	at       time.Duration // monotonic time of the last answer
	rechecks int
}

func (f *fakeConfirmer) recheckWhile(func() bool) {}

func (f *fakeConfirmer) enabled() bool { return true }
func (f *fakeConfirmer) recheck(context.Context) {
	f.rechecks++
	if f.answers {
		f.answered, f.at = true, f.clk.Mono()
	}
}
func (f *fakeConfirmer) judge(sinceMono time.Duration) jumpVerdict {
	switch {
	case !f.answered || f.at < sinceMono:
		return noVerdict
	case f.agrees:
		return agrees
	}
	return disagrees
}

func TestJumpGuard(t *testing.T) {
	const threshold = 3 * time.Second
	tests := []struct {
		name      string
		confirmer *fakeConfirmer // nil: none configured
		jump      time.Duration
		undo      bool // step the clock back before confirming
		// judgeBeforeUndo: the sources are asked about the jumped clock
		// before it is undone.
		judgeBeforeUndo bool
		wait            time.Duration // monotonic time passing after the jump
		wantHold        bool          // still holding at the end
		wantRecheck     int
	}{
		{name: "a step within the fence headroom is no jump", jump: 2 * time.Second},
		{name: "a jump, undone: fences resume at once", jump: 10 * time.Second, undo: true, wantRecheck: 0},
		{name: "a jump judged, then undone: the source is asked again", confirmer: &fakeConfirmer{answers: true}, jump: 10 * time.Second,
			judgeBeforeUndo: true, undo: true, wantRecheck: 2},
		{name: "no source: held until JumpHold", jump: 10 * time.Second, wait: JumpHold / 2, wantHold: true},
		{name: "no source: accepted after JumpHold", jump: 10 * time.Second, wait: JumpHold},
		{name: "a source agrees: accepted at once", confirmer: &fakeConfirmer{answers: true, agrees: true}, jump: 10 * time.Second, wantRecheck: 1},
		{name: "a source disagrees: held, even past JumpHold", confirmer: &fakeConfirmer{answers: true}, jump: 10 * time.Second,
			wait: 2 * JumpHold, wantHold: true, wantRecheck: 1},
		{name: "a source that cannot answer: accepted after JumpHold", confirmer: &fakeConfirmer{}, jump: 10 * time.Second,
			wait: JumpHold, wantRecheck: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktest.NewFake(time.UnixMilli(1_750_000_000_000))
			g := health.New(zerolog.Nop(), nil)
			var cfs []jumpConfirmer
			if tc.confirmer != nil {
				tc.confirmer.clk = clk
				cfs = append(cfs, tc.confirmer)
			}
			j := newJumpGuard(g, clk, threshold, zerolog.Nop(), cfs...)
			ctx := context.Background()
			clk.Advance(time.Second)
			if j.Holding() || !g.Ready() {
				t.Fatal("holding with a steady clock")
			}
			clk.StepWall(tc.jump)
			jumped := tc.jump > threshold
			if j.Holding() != jumped {
				t.Fatalf("after a jump of %v: holding %v, want %v", tc.jump, !jumped, jumped)
			}
			if jumped && g.Status().Reason != health.ReasonClockJump {
				t.Fatalf("after the jump: %+v, want out with clock_jump", g.Status())
			}
			if tc.judgeBeforeUndo {
				j.tryConfirm(ctx) // the sources judge the jumped clock (and disagree)
			}
			if tc.undo {
				clk.StepWall(-tc.jump)
				j.step()
				j.reaskIfUndone(ctx) // a source that judged the jump looks again
			}
			j.tryConfirm(ctx) // asks the sources once
			clk.Advance(tc.wait)
			j.tryConfirm(ctx)
			if j.Holding() != tc.wantHold || g.Ready() == tc.wantHold {
				t.Fatalf("at the end: holding %v, ready %v; want holding %v (%+v)", j.Holding(), g.Ready(), tc.wantHold, g.Status())
			}
			if tc.confirmer != nil && tc.confirmer.rechecks != tc.wantRecheck {
				t.Fatalf("sources asked %d times, want %d", tc.confirmer.rechecks, tc.wantRecheck)
			}
			if !tc.wantHold {
				// The accepted time is the new baseline: no suspicion later.
				clk.Advance(time.Second)
				if j.Holding() {
					t.Fatal("holding again after the time was accepted")
				}
			}
		})
	}
}

// A step of 100 ms or more that the jump guard accepts (within the
// headroom, backward, or a correction) starts a round of every source at
// once: a node judged the outlier on its old clock (peer_offset) must not
// wait for the next regular round (an hour in the chaos runs) once its
// clock is set right, and a source that passed the old clock judges the
// new one. Small drifts ask nobody.
func TestJumpGuardReasksAfterAStep(t *testing.T) {
	for _, tc := range []struct {
		name string
		step time.Duration
		want int
	}{
		{"forward within the headroom", 1600 * time.Millisecond, 1},
		{"backward", -1500 * time.Millisecond, 1},
		{"a step of reaskStep", reaskStep, 1},
		{"backward by reaskStep", -reaskStep, 1},
		{"a correction of a step back", 0, 1},
		{"a drift below reaskStep", reaskStep / 2, 0},
		{"a drift back below reaskStep", -reaskStep / 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktest.NewFake(time.UnixMilli(1_750_000_000_000))
			cf := &fakeConfirmer{clk: clk, answers: true, agrees: true}
			j := newJumpGuard(health.New(zerolog.Nop(), nil), clk, 3*time.Second, zerolog.Nop(), cf)
			clk.Advance(time.Second)
			j.step()
			if tc.step == 0 { // a step back seen and re-asked, then its correction
				clk.StepWall(-8 * time.Second)
				j.step()
				j.reaskIfUndone(context.Background())
				cf.rechecks = 0
				tc.step = 8 * time.Second
			}
			clk.StepWall(tc.step)
			j.step()
			j.reaskIfUndone(context.Background())
			if cf.rechecks != tc.want {
				t.Fatalf("after a step of %v: sources asked %d times, want %d", tc.step, cf.rechecks, tc.want)
			}
		})
	}
}

// A peer round that measured nothing confirms nothing. A node cut off from
// ZooKeeper (no peer list) with NTP off had its clock stepped forward an
// hour: the peer round asked at once could not list the peers, yet stamped
// its snapshot with the jumped clock and kept the last good round's
// figures, which read as "answered, agrees", so the jump was accepted at
// once and written into the fences. It must be held for JumpHold instead.
func TestJumpGuardPeerRoundWithoutAListConfirmsNothing(t *testing.T) {
	clk := clocktest.NewFake(time.UnixMilli(1_750_000_000_000))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"unix_ns":%d}`, clk.WallNanos())
	}))
	t.Cleanup(srv.Close)
	var listErr atomic.Value // error; nil: the list is available
	src := peerListFunc(func(context.Context) ([]Peer, error) {
		if err, _ := listErr.Load().(error); err != nil {
			return nil, err
		}
		return []Peer{{WorkerID: 1, Addr: strings.TrimPrefix(srv.URL, "http://")}}, nil
	})
	g := health.New(zerolog.Nop(), nil)
	peers, err := NewPeers(g, clk, src, PeersConfig{Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if s, err := peers.checkNow(ctx); err != nil || s.Reachable != 1 || s.Disagree != 0 {
		t.Fatalf("the round before the jump: %+v, %v; want one peer agreeing", s, err)
	}
	j := newJumpGuard(g, clk, 3*time.Second, zerolog.Nop(), peersConfirmer{peers})
	clk.Advance(time.Second)
	listErr.Store(errors.New("zk: could not connect to a server"))
	clk.StepWall(time.Hour)
	if !j.Holding() {
		t.Fatal("a jump of an hour is not held")
	}
	j.tryConfirm(ctx) // asks the peers at once: no list
	if s := peers.Snapshot(); s.SourceError == "" {
		t.Fatalf("the re-ask got a peer list: %+v", s)
	}
	if !j.Holding() {
		t.Fatal("the jump was accepted on a peer round that measured nothing")
	}
	clk.Advance(JumpHold / 2)
	j.tryConfirm(ctx)
	if !j.Holding() {
		t.Fatal("the jump was accepted before JumpHold with no source answering")
	}
	clk.Advance(JumpHold / 2)
	j.tryConfirm(ctx)
	if j.Holding() {
		t.Fatal("the jump is still held after JumpHold with no source answering")
	}
}

// adjustablePeers serves GET /time from n loopback servers reading clk
// minus lag; the source lists them, or (gone) none or only dead addresses.
type adjustablePeers struct {
	lag   atomic.Int64 // ns the peers' clocks are behind clk
	gone  atomic.Int32 // 0: listed; goneEmpty: an empty list; goneDead: unreachable addresses
	addrs []string
}

const (
	goneEmpty int32 = 1
	goneDead  int32 = 2
)

func startAdjustablePeers(t *testing.T, clk *clocktest.Fake, n int) *adjustablePeers {
	t.Helper()
	p := &adjustablePeers{}
	for range n {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintf(w, `{"unix_ns":%d}`, clk.WallNanos()-p.lag.Load())
		}))
		t.Cleanup(srv.Close)
		p.addrs = append(p.addrs, strings.TrimPrefix(srv.URL, "http://"))
	}
	return p
}

// PeerIDs implements PeerSource.
func (p *adjustablePeers) PeerIDs(ctx context.Context) ([]int64, error) {
	return peerListFunc(p.peers).PeerIDs(ctx)
}

// PeerAddrs implements PeerSource.
func (p *adjustablePeers) PeerAddrs(ctx context.Context, ids []int64) ([]Peer, error) {
	return peerListFunc(p.peers).PeerAddrs(ctx, ids)
}

// peers lists the peers as they are now.
func (p *adjustablePeers) peers(context.Context) ([]Peer, error) {
	var out []Peer
	for i, a := range p.addrs {
		switch p.gone.Load() {
		case goneEmpty:
			continue
		case goneDead:
			a = "127.0.0.1:1"
		}
		out = append(out, Peer{WorkerID: int64(i + 1), Addr: a})
	}
	return out, nil
}

// newJumpPeers returns a peer check over src (an hour between regular
// rounds) after one round in which every peer agrees.
func newJumpPeers(t *testing.T, g *health.Guard, clk *clocktest.Fake, src PeerSource) *Peers {
	t.Helper()
	peers, err := NewPeers(g, clk, src, PeersConfig{Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := peers.checkNow(context.Background()); err != nil {
		t.Fatalf("the round before the jump: %v", err)
	}
	return peers
}

// peerJump is a jump guard whose one confirmer is a real peer check over
// adjustable loopback peers, after a round in which they all agree and a
// second of steady clock.
type peerJump struct {
	clk   *clocktest.Fake
	src   *adjustablePeers
	g     *health.Guard
	peers *Peers
	j     *JumpGuard
}

func newPeerJump(t *testing.T, n int) peerJump {
	t.Helper()
	clk := clocktest.NewFake(time.UnixMilli(1_750_000_000_000))
	src := startAdjustablePeers(t, clk, n)
	g := health.New(zerolog.Nop(), nil)
	peers := newJumpPeers(t, g, clk, src)
	j := newJumpGuard(g, clk, 3*time.Second, zerolog.Nop(), peersConfirmer{peers})
	clk.Advance(time.Second)
	return peerJump{clk, src, g, peers, j}
}

// Once the peers, measured after the jump, disagreed with it, a later
// round that measures nothing (every other node out of service or
// restarting: an empty list; or none reachable) must not let JumpHold
// accept it: the jump stands against the only evidence there is.
func TestJumpGuardRemembersADisagreement(t *testing.T) {
	for _, tc := range []struct {
		name string
		gone int32
	}{{"then an empty peer list", goneEmpty}, {"then no peer reachable", goneDead}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newPeerJump(t, 2)
			clk, src, g, peers, j := r.clk, r.src, r.g, r.peers, r.j
			ctx := context.Background()
			clk.StepWall(time.Hour)
			src.lag.Store(int64(time.Hour)) // the peers still read the true time
			if !j.Holding() {
				t.Fatal("a jump of an hour is not held")
			}
			j.tryConfirm(ctx) // asks the peers at once: 2 of 2 disagree
			clk.Advance(JumpHold)
			j.tryConfirm(ctx)
			if !j.Holding() {
				t.Fatal("accepted past JumpHold although the peers disagreed")
			}
			src.gone.Store(tc.gone)
			_, _ = peers.checkNow(ctx) // a regular round that measures nothing
			j.tryConfirm(ctx)
			if !j.Holding() {
				t.Fatalf("the jump was accepted after the peers disagreed and then measured nothing: %+v", g.Status())
			}
			src.gone.Store(0)
			src.lag.Store(0) // the peers come to agree (say, the true time was the new one)
			_, _ = peers.checkNow(ctx)
			j.tryConfirm(ctx)
			if j.Holding() {
				t.Fatal("still held after the peers, measured after the jump, agree")
			}
		})
	}
}

// A second forward jump while the first is held is a suspicion of its own.
// Seen by a step before anything confirmed the first, it restarts the
// suspicion with the whole skew, and a round measured before it counts for
// nothing. Landing after the guard's last step but before it accepted the
// first (on a round measured before the second), it is not folded into the
// acceptance: the baseline moves by the first jump as measured, and the
// next step holds the second. (The fake monotonic clock is advanced
// between events, as the real one always is.)
func TestJumpGuardASecondJumpIsItsOwn(t *testing.T) {
	for _, tc := range []struct {
		name       string
		stepFirst  bool   // the guard steps between jump 2 and its confirmation
		wantDetail string // clock_jump's figure at the end
	}{
		{"seen before jump 1 is confirmed: one suspicion of both", true, "1h0m10s"},
		{"landing just before jump 1 is accepted: a suspicion of its own", false, "by 1h0m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newPeerJump(t, 1)
			clk, src, g, peers, j := r.clk, r.src, r.g, r.peers, r.j
			ctx := context.Background()
			src.gone.Store(goneDead)
			clk.StepWall(10 * time.Second) // jump 1, which the peer's clock shares
			if !j.Holding() {
				t.Fatal("jump 1 is not held")
			}
			clk.Advance(10 * time.Millisecond)
			j.tryConfirm(ctx) // the peer is unreachable: held
			src.gone.Store(0)
			clk.Advance(10 * time.Millisecond)
			_, _ = peers.checkNow(ctx) // a round: the peer agrees with jump 1
			clk.Advance(10 * time.Millisecond)
			clk.StepWall(time.Hour) // jump 2
			src.lag.Store(int64(time.Hour))
			if tc.stepFirst {
				j.step()
			}
			clk.Advance(10 * time.Millisecond)
			j.tryConfirm(ctx)
			if !j.Holding() {
				t.Fatal("jump 2 (1h) was accepted on a round measured before it")
			}
			if got := g.Failing()[health.ReasonClockJump]; !strings.Contains(got, tc.wantDetail) {
				t.Fatalf("clock_jump detail %q, want %q", got, tc.wantDetail)
			}
		})
	}
}

// A clock that moves again while its jump is held (set right but still
// beyond the headroom, then back: a hypervisor agent and chrony fighting)
// restarts the suspicion: what the sources judged is not the clock any
// more, so an agreement with the clock in between confirms nothing about
// the clock after.
func TestJumpGuardMovedWhileHeldStartsAfresh(t *testing.T) {
	r := newPeerJump(t, 1)
	clk, src, peers, j := r.clk, r.src, r.peers, r.j
	ctx := context.Background()
	// The node was 5s behind the peer (the peer says +5s): it jumps +10s.
	src.lag.Store(int64(5 * time.Second))
	clk.StepWall(10 * time.Second)
	if !j.Holding() {
		t.Fatal("the jump is not held")
	}
	clk.Advance(10 * time.Millisecond)
	j.tryConfirm(ctx)              // the peer disagrees (5s off)
	clk.StepWall(-5 * time.Second) // set to the peer's time: +5s from the baseline, still held
	src.lag.Store(0)
	j.step()
	clk.Advance(10 * time.Millisecond)
	_, _ = peers.checkNow(ctx) // agrees with the clock as it is now
	clk.Advance(10 * time.Millisecond)
	clk.StepWall(5 * time.Second) // flaps back, 5s ahead of the peer
	src.lag.Store(int64(5 * time.Second))
	j.step()
	clk.Advance(10 * time.Millisecond)
	j.tryConfirm(ctx)
	if !j.Holding() {
		t.Fatal("a clock 5s ahead of the peer was accepted on a round that judged it before it moved")
	}
}

// A held jump is re-checked by the sources' own rounds (with their
// backoff), not only asked once: the one peer disagrees with the jump
// (peer_offset itself passes: two clocks, no majority, so its rounds would
// wait the hour), then comes to agree, which releases it within RetryMax.
func TestJumpGuardHeldJumpIsRechecked(t *testing.T) {
	r := newPeerJump(t, 1)
	clk, src, g, peers, j := r.clk, r.src, r.g, r.peers, r.j
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() { peers.Run(ctx) })
	wg.Go(func() { j.Run(ctx) })
	src.lag.Store(int64(10 * time.Second)) // the peer does not share the jump …
	clk.StepWall(10 * time.Second)
	waitUntil(t, 5*time.Second, "the peers asked after the jump", func() bool { return peers.Snapshot().Rounds >= 3 && j.Holding() })
	src.lag.Store(0)
	waitUntil(t, RetryMax+3*time.Second, "the held jump released", func() bool { return !j.Holding() && g.Ready() })
}

// One wrong NTP server of three cannot hold a correction: the node's
// clock, 4s behind, is stepped right (a jump beyond the 3s headroom); two
// servers agree with the new time, the third (10s off) does not.
func TestJumpGuardOneBadNTPServerDoesNotHoldACorrection(t *testing.T) {
	const a, b, c = "a.example:123", "b.example:123", "c.example:123"
	clk := clocktest.NewFake(time.UnixMilli(1_750_000_000_000))
	q := &skewedServers{errs: map[string]time.Duration{c: 10 * time.Second}}
	q.nodeErr.Store(int64(-4 * time.Second))
	g := health.New(zerolog.Nop(), nil)
	n, err := NewNTP(g, clk, NTPConfig{Servers: []string{a, b, c}, Querier: q, Interval: time.Minute, MinGap: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := n.checkNow(ctx); !errors.Is(err, errNTPOffset) {
		t.Fatalf("4s behind, 2 of 3 servers say so: %v, want ntp_offset", err)
	}
	j := newJumpGuard(g, clk, 3*time.Second, zerolog.Nop(), ntpConfirmer{n})
	clk.Advance(time.Second)
	clk.StepWall(4 * time.Second) // set right
	q.nodeErr.Store(0)
	if !j.Holding() {
		t.Fatal("the 4s step is not held")
	}
	j.tryConfirm(ctx) // asks NTP at once: a and b agree
	if j.Holding() || !g.Ready() {
		t.Fatalf("2 of 3 servers agree with the corrected clock, yet: holding %v, %+v", j.Holding(), g.Status())
	}
}

// skewedServers answers NTP queries: each server's time is the true time
// plus its error; the node's clock reads the true time plus nodeErr.
type skewedServers struct {
	nodeErr atomic.Int64
	errs    map[string]time.Duration
}

func (q *skewedServers) Query(_ context.Context, addr string, opt ntp.QueryOptions) (*ntp.Response, error) {
	nodeNow := opt.GetSystemTime()
	server := nodeNow.Add(-time.Duration(q.nodeErr.Load())).Add(q.errs[addr])
	return &ntp.Response{ClockOffset: server.Sub(nodeNow), RTT: time.Millisecond, Stratum: 2, Version: 4,
		RootDistance: 10 * time.Millisecond, Leap: ntp.LeapNoWarning}, nil
}

// waitUntil polls cond every millisecond until it holds or timeout passes.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testsupport.Poll(t, timeout, time.Millisecond, what, cond)
}

// One source agreeing never overrides another that disagrees by its
// majority: the peers share a bad step (the same bad time source), all
// three NTP servers say the clock is an hour ahead. Accepting would write
// fences an hour ahead; the jump stays held.
func TestJumpGuardOneSourceAgreeingDoesNotOverrideAnother(t *testing.T) {
	const a, b, c = "a.example:123", "b.example:123", "c.example:123"
	clk := clocktest.NewFake(time.UnixMilli(1_750_000_000_000))
	q := &skewedServers{errs: map[string]time.Duration{}}
	g := health.New(zerolog.Nop(), nil)
	n, err := NewNTP(g, clk, NTPConfig{Servers: []string{a, b, c}, Querier: q, Interval: time.Minute, MinGap: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := n.checkNow(ctx); err != nil {
		t.Fatal(err)
	}
	src := startAdjustablePeers(t, clk, 2) // they read clk: they share the step
	peers := newJumpPeers(t, g, clk, src)
	for _, order := range [][]jumpConfirmer{{ntpConfirmer{n}, peersConfirmer{peers}}, {peersConfirmer{peers}, ntpConfirmer{n}}} {
		j := newJumpGuard(g, clk, 3*time.Second, zerolog.Nop(), order...)
		clk.Advance(time.Second)
		q.nodeErr.Add(int64(time.Hour))
		clk.StepWall(time.Hour)
		if !j.Holding() {
			t.Fatal("a jump of an hour is not held")
		}
		clk.Advance(10 * time.Millisecond)
		j.tryConfirm(ctx)
		if !n.Snapshot().offsetBeyond() {
			t.Fatal("NTP does not disagree")
		}
		if j.Holding() == false {
			t.Fatalf("accepted (confirmers %T first) although 3 of 3 NTP servers disagree: %v", order[0], g.Failing())
		}
	}
}

// The peers' jury is every peer listed: one reachable peer of three (two
// unreachable) decides nothing alone, as one NTP server of three does not,
// so with no majority the jump is accepted after JumpHold.
func TestJumpGuardOneReachablePeerOfThreeDecidesNothing(t *testing.T) {
	clk := clocktest.NewFake(time.UnixMilli(1_750_000_000_000))
	live := startAdjustablePeers(t, clk, 1)
	src := peerListFunc(func(context.Context) ([]Peer, error) {
		return []Peer{{WorkerID: 1, Addr: live.addrs[0]}, {WorkerID: 2, Addr: "127.0.0.1:1"}, {WorkerID: 3, Addr: "127.0.0.1:1"}}, nil
	})
	g := health.New(zerolog.Nop(), nil)
	peers := newJumpPeers(t, g, clk, src)
	j := newJumpGuard(g, clk, 3*time.Second, zerolog.Nop(), peersConfirmer{peers})
	ctx := context.Background()
	clk.Advance(time.Second)
	live.lag.Store(int64(10 * time.Second)) // the one reachable peer disagrees
	clk.StepWall(10 * time.Second)
	if !j.Holding() {
		t.Fatal("the jump is not held")
	}
	clk.Advance(10 * time.Millisecond)
	j.tryConfirm(ctx)
	if !j.Holding() {
		t.Fatal("accepted at once with no majority")
	}
	clk.Advance(JumpHold)
	j.tryConfirm(ctx)
	if j.Holding() {
		t.Fatalf("still held after JumpHold on one peer's word of three listed: %+v", peers.Snapshot())
	}
}

// blockingWriter blocks the first log line containing match until release
// is closed (entered is closed when it starts): a slow stdout.
type blockingWriter struct {
	match            string
	entered, release chan struct{}
	once             atomic.Bool
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	if strings.Contains(string(p), w.match) && w.once.CompareAndSwap(false, true) {
		close(w.entered)
		<-w.release
	}
	return len(p), nil
}

// The check follows the suspicion whatever the goroutines stepping the
// clock (the guard's loop, the fence keeper, the renewals) interleave with
// a slow log write: a Fail landing after the undo's Pass left clock_jump
// failing forever with nothing held; a Pass landing after the next jump's
// Fail let the node in while fences were held.
func TestJumpGuardCheckFollowsTheSuspicion(t *testing.T) {
	for _, tc := range []struct {
		name  string
		match string                                  // the log line that stalls
		first func(clk *clocktest.Fake, j *JumpGuard) // on the stalled goroutine
		then  func(clk *clocktest.Fake, j *JumpGuard) // meanwhile, elsewhere
	}{
		{
			name: "the undo seen while the jump's line is written", match: "suspect forward clock jump",
			first: func(clk *clocktest.Fake, j *JumpGuard) { clk.StepWall(time.Hour); j.step() },
			then:  func(clk *clocktest.Fake, j *JumpGuard) { clk.StepWall(-time.Hour); j.Holding() },
		},
		{
			name: "a second jump seen while the acceptance's line is written", match: "forward clock jump accepted",
			first: func(clk *clocktest.Fake, j *JumpGuard) {
				clk.StepWall(10 * time.Second)
				j.step()
				clk.Advance(JumpHold) // no source: accepted after JumpHold
				j.tryConfirm(context.Background())
			},
			then: func(clk *clocktest.Fake, j *JumpGuard) { clk.StepWall(time.Hour); j.Holding() },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktest.NewFake(time.UnixMilli(1_750_000_000_000))
			w := &blockingWriter{match: tc.match, entered: make(chan struct{}), release: make(chan struct{})}
			g := health.New(zerolog.Nop(), nil)
			j := newJumpGuard(g, clk, 3*time.Second, zerolog.New(w))
			done := make(chan struct{})
			go func() { defer close(done); tc.first(clk, j) }()
			select {
			case <-w.entered:
			case <-time.After(10 * time.Second):
				t.Fatal("the log line never came")
			}
			tc.then(clk, j)
			close(w.release)
			<-done
			_, failing := g.Failing()[health.ReasonClockJump]
			if held := j.Holding(); failing != held {
				t.Fatalf("clock_jump failing %v while holding %v", failing, held)
			}
		})
	}
}

// A correction is not a jump: a step forward that brings the wall clock
// back to the time the monotonic clock expects (within the steps back it
// corrects, plus the fence headroom) is followed at once; only what lies
// beyond the trusted trajectory is held, as a jump without a step back
// before it is.
func TestJumpGuardCorrectionIsNotAJump(t *testing.T) {
	const threshold = 3 * time.Second
	type step struct {
		wall     time.Duration // the wall clock steps by this
		after    time.Duration // then both clocks run on by this
		wantHold bool
	}
	tests := []struct {
		name  string
		steps []step
		// wantJumps is how many times the node left service with clock_jump.
		wantJumps int64
	}{
		{"a step back, corrected", []step{{wall: -8 * time.Second}, {wall: 8 * time.Second}}, 0},
		{"a step back, corrected after the clocks ran on", []step{{wall: -8 * time.Second, after: 5 * time.Second}, {wall: 8 * time.Second}}, 0},
		{"two steps back, corrected in one", []step{{wall: -3 * time.Second}, {wall: -5 * time.Second}, {wall: 8 * time.Second}}, 0},
		{"a step back, corrected in two", []step{{wall: -8 * time.Second}, {wall: 3 * time.Second}, {wall: 5 * time.Second}}, 0},
		{"a correction that overshoots within the headroom", []step{{wall: -8 * time.Second}, {wall: 10 * time.Second}}, 0},
		{"a correction that overshoots beyond the headroom: the overshoot is a jump",
			[]step{{wall: -8 * time.Second}, {wall: 12 * time.Second, wantHold: true}}, 1},
		{"an overshoot, undone", []step{{wall: -8 * time.Second}, {wall: 12 * time.Second, wantHold: true}, {wall: -4 * time.Second}}, 1},
		{"a step forward with no step back before it: a jump", []step{{wall: 8 * time.Second, wantHold: true}}, 1},
		{"a step back, corrected, then the same step forward again: a jump",
			[]step{{wall: -8 * time.Second}, {wall: 8 * time.Second}, {wall: 8 * time.Second, wantHold: true}}, 1},
		{"a step back the clock then caught up by slewing: a step forward is a jump",
			[]step{{wall: -8 * time.Second}, {wall: time.Second}, {wall: time.Second}, {wall: 2 * time.Second}, {wall: 2 * time.Second}, {wall: 2 * time.Second}, {wall: 8 * time.Second, wantHold: true}}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktest.NewFake(time.UnixMilli(1_750_000_000_000))
			g := health.New(zerolog.Nop(), nil)
			j := newJumpGuard(g, clk, threshold, zerolog.Nop())
			clk.Advance(time.Second)
			for i, s := range tc.steps {
				clk.StepWall(s.wall)
				if got := j.Holding(); got != s.wantHold {
					t.Fatalf("step %d (%v): holding %v, want %v (%+v)", i+1, s.wall, got, s.wantHold, g.Status())
				}
				if g.Ready() == s.wantHold {
					t.Fatalf("step %d (%v): %+v, want ready %v", i+1, s.wall, g.Status(), !s.wantHold)
				}
				clk.Advance(s.after)
				j.step()
			}
			if got := g.Transitions()[health.ReasonClockJump]; got != tc.wantJumps {
				t.Errorf("left service with clock_jump %d times, want %d", got, tc.wantJumps)
			}
		})
	}
}

// An overshoot held as a jump and then confirmed becomes the trusted time:
// the steps that follow are judged from there.
func TestJumpGuardConfirmedOvershootIsTheNewTrajectory(t *testing.T) {
	const threshold = 3 * time.Second
	clk := clocktest.NewFake(time.UnixMilli(1_750_000_000_000))
	g := health.New(zerolog.Nop(), nil)
	j := newJumpGuard(g, clk, threshold, zerolog.Nop())
	clk.StepWall(-8 * time.Second)
	j.step()
	clk.StepWall(12 * time.Second)
	if !j.Holding() || !strings.Contains(g.Status().Detail, "4s beyond the time the monotonic clock expects") {
		t.Fatalf("overshoot of 4s: holding %v, %+v", j.Holding(), g.Status())
	}
	j.tryConfirm(context.Background())
	clk.Advance(JumpHold)
	j.tryConfirm(context.Background())
	if j.Holding() {
		t.Fatalf("still holding after JumpHold with no source: %+v", g.Status())
	}
	// From the accepted time, a step back and its correction pass, and a
	// step forward beyond it is a jump again.
	for i, s := range []struct {
		wall time.Duration
		hold bool
	}{{-5 * time.Second, false}, {5 * time.Second, false}, {4 * time.Second, true}} {
		clk.StepWall(s.wall)
		if got := j.Holding(); got != s.hold {
			t.Fatalf("step %d (%v) after the accepted overshoot: holding %v, want %v (%+v)", i+1, s.wall, got, s.hold, g.Status())
		}
	}
}

// A forward step the guard follows at once (within the headroom, or a
// correction of a step back) wakes the fence keeper, so requests do not
// run into the fence written before the step; a step back, a drift and a
// held jump do not.
func TestJumpGuardForwardStepWakesTheFenceKeeper(t *testing.T) {
	const threshold = 3 * time.Second
	for _, tc := range []struct {
		name  string
		steps []time.Duration
		want  int // wakes after the last step
	}{
		{"a step within the headroom", []time.Duration{2 * time.Second}, 1},
		{"a correction of a step back", []time.Duration{-8 * time.Second, 8 * time.Second}, 1},
		{"a step back", []time.Duration{-8 * time.Second}, 0},
		{"a drift", []time.Duration{reaskStep / 2}, 0},
		{"a jump, held", []time.Duration{8 * time.Second}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktest.NewFake(time.UnixMilli(1_750_000_000_000))
			j := newJumpGuard(health.New(zerolog.Nop(), nil), clk, threshold, zerolog.Nop())
			wakes := 0
			j.stepped = func() { wakes++ }
			for _, s := range tc.steps {
				wakes = 0
				clk.StepWall(s)
				j.step()
			}
			if wakes != tc.want {
				t.Fatalf("fence keeper woken %d times after %v, want %d", wakes, tc.steps, tc.want)
			}
		})
	}
}

// The shared sampler's readings alone, with no caller of Holding, start a
// suspicion, follow a step within the headroom and end the suspicion when
// the jump is undone; the watcher's feed gets each reading after the jump
// guard judged it.
func TestJumpGuardSharesItsSampler(t *testing.T) {
	clk := clocktest.NewFake(time.UnixMilli(1_750_000_000_000))
	g := health.New(zerolog.Nop(), nil)
	j := newJumpGuard(g, clk, 3*time.Second, zerolog.Nop())
	var stepped atomic.Int32
	j.stepped = func() { stepped.Add(1) }
	var fed []Sample
	var heldWhenFed []bool
	j.shareSampler(time.Millisecond, func(s Sample) {
		fed = append(fed, s)
		heldWhenFed = append(heldWhenFed, j.Suspicious())
	})
	steps := []struct {
		name        string
		do          func()
		wantHeld    bool
		wantStepped int32
	}{
		{"a steady clock", func() { clk.Advance(time.Second) }, false, 0},
		{"a step within the headroom is followed", func() { clk.StepWall(2 * time.Second) }, false, 1},
		{"a jump beyond it is held", func() { clk.StepWall(10 * time.Second) }, true, 1},
		{"the jump undone", func() { clk.StepWall(-10 * time.Second) }, false, 1},
	}
	for i, st := range steps {
		st.do()
		j.sampler.Sample()
		if j.Suspicious() != st.wantHeld || g.Ready() == st.wantHeld {
			t.Fatalf("%s: held %v, ready %v; want held %v (%+v)", st.name, j.Suspicious(), g.Ready(), st.wantHeld, g.Status())
		}
		if st.wantHeld && g.Status().Reason != health.ReasonClockJump {
			t.Fatalf("%s: %+v, want out with clock_jump", st.name, g.Status())
		}
		if n := stepped.Load(); n != st.wantStepped {
			t.Fatalf("%s: the fence keeper woken %d times, want %d", st.name, n, st.wantStepped)
		}
		if len(fed) != i+1 || fed[i].Wall != clk.WallNanos() || heldWhenFed[i] != st.wantHeld {
			t.Fatalf("%s: fed %d readings (last %+v, held %v), want %d, the last at wall %d, after the jump guard's jumpVerdict %v",
				st.name, len(fed), fed[len(fed)-1], heldWhenFed[len(heldWhenFed)-1], i+1, clk.WallNanos(), st.wantHeld)
		}
	}
}
