package clockguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/clock/clocktest"

	"codeberg.org/snowflaked/snowflaked/internal/health"
)

// Answer modes of a timePeer.
const (
	answerNanos     int32 = iota // {"unix_ms":…,"unix_ns":…}
	answerMillis                 // {"unix_ms":…}
	answerStatus500              // 500 with an error body
	answerBadJSON                // 200 with a body that is not JSON
	answerNoFields               // 200 with {}
)

// timePeer is a real fasthttp server on 127.0.0.1 serving GET /time from a
// clock shifted by an adjustable offset.
type timePeer struct {
	addr   string
	clk    clock.Clock
	offset atomic.Int64 // time.Duration
	delay  atomic.Int64 // time.Duration slept before and after reading the clock
	// stall is slept after reading the clock, before answering (a pause of
	// either process between the two ends of the exchange), for the first
	// stallFirst requests of each connection (0: all of them).
	stall      atomic.Int64
	stallFirst atomic.Int64
	mode       atomic.Int32
	requests   atomic.Int64
	arrive     func()   // called at the start of every request, if set
	conns      sync.Map // the IDs of the connections requests came on
	ln         *trackingListener
}

// trackingListener remembers the connections it accepted, so that a test
// can close them from the server's side.
type trackingListener struct {
	net.Listener
	mu       sync.Mutex
	accepted []net.Conn
	refuse   atomic.Bool // close every new connection at once
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	for err == nil && l.refuse.Load() {
		_ = c.Close()
		c, err = l.Listener.Accept()
	}
	if err == nil {
		l.mu.Lock()
		l.accepted = append(l.accepted, c)
		l.mu.Unlock()
	}
	return c, err
}

// dropConns closes every connection the peer accepted, as a peer (or a
// middlebox) that ends idle connections does.
func (p *timePeer) dropConns() {
	p.ln.mu.Lock()
	defer p.ln.mu.Unlock()
	for _, c := range p.ln.accepted {
		_ = c.Close()
	}
}

// connCount is how many connections requests came on.
func (p *timePeer) connCount() int {
	n := 0
	p.conns.Range(func(any, any) bool { n++; return true })
	return n
}

// startTimePeer starts a peer whose /time is clk + offset; t.Cleanup stops it.
func startTimePeer(t *testing.T, clk clock.Clock, offset time.Duration) *timePeer {
	t.Helper()
	return startTimePeerWith(t, clk, offset, nil)
}

// startTimePeerWith is startTimePeer with a hook run at the start of every
// request.
func startTimePeerWith(t *testing.T, clk clock.Clock, offset time.Duration, arrive func()) *timePeer {
	t.Helper()
	p := &timePeer{clk: clk, arrive: arrive}
	p.offset.Store(int64(offset))
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	ln := &trackingListener{Listener: tcp}
	p.addr, p.ln = ln.Addr().String(), ln
	srv := &fasthttp.Server{
		Handler:     p.handle,
		ReadTimeout: 5 * time.Second, IdleTimeout: 5 * time.Second,
		// No process-wide date goroutine and no idle workers lingering for
		// 10s: keeps the goroutine counts of the leak checks exact.
		NoDefaultDate:         true,
		MaxIdleWorkerDuration: 20 * time.Millisecond,
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.ShutdownWithContext(ctx); err != nil {
			t.Errorf("shut down peer %s: %v", p.addr, err)
		}
		_ = ln.Close() // in case Serve had not started when Shutdown ran
		<-done
	})
	// One request before returning: Serve starts its worker pool's
	// goroutines when it runs, and a leak check that counted goroutines
	// before that would see them as leaked.
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://" + p.addr + warmUpPath)
	req.SetConnectionClose()
	if err := fasthttp.DoTimeout(req, resp, 5*time.Second); err != nil {
		t.Fatalf("peer %s not serving: %v", p.addr, err)
	}
	return p
}

// warmUpPath is the path of startTimePeerWith's first request.
const warmUpPath = "/warm-up"

func (p *timePeer) handle(ctx *fasthttp.RequestCtx) {
	if string(ctx.Path()) == warmUpPath {
		return // startTimePeerWith's: not counted, no hook
	}
	p.requests.Add(1)
	p.conns.Store(ctx.ConnID(), true)
	if p.arrive != nil {
		p.arrive()
	}
	if string(ctx.Path()) != peerTimePath || !ctx.IsGet() {
		ctx.SetStatusCode(fasthttp.StatusNotFound) // not ctx.Error: it resets NoDefaultDate
		return
	}
	delay := time.Duration(p.delay.Load())
	time.Sleep(delay)
	now := p.clk.WallNanos() + p.offset.Load()
	time.Sleep(delay)
	if stall := time.Duration(p.stall.Load()); stall > 0 {
		if first := p.stallFirst.Load(); first == 0 || int64(ctx.ConnRequestNum()) <= first {
			time.Sleep(stall)
		}
	}
	ctx.SetContentType("application/json")
	switch p.mode.Load() {
	case answerNanos:
		fmt.Fprintf(ctx, `{"unix_ms":%d,"unix_ns":%d}`, now/int64(time.Millisecond), now)
	case answerMillis:
		fmt.Fprintf(ctx, `{"unix_ms":%d}`, now/int64(time.Millisecond))
	case answerStatus500:
		ctx.SetStatusCode(fasthttp.StatusInternalServerError)
		ctx.SetBodyString(`{"error":{"code":"internal","message":"boom"}}`)
	case answerBadJSON:
		ctx.SetBodyString("not json")
	case answerNoFields:
		ctx.SetBodyString("{}")
	}
}

// staticPeers is a PeerSource with a settable list or error; it records
// the peers the check told it to forget.
type staticPeers struct {
	mu        sync.Mutex
	peers     []Peer
	err       error
	calls     int
	forgotten []int64
}

func (s *staticPeers) PeerIDs(context.Context) ([]int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.err != nil {
		return nil, s.err
	}
	return peerIDs(s.peers), nil
}

func (s *staticPeers) PeerAddrs(_ context.Context, ids []int64) ([]Peer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	return peersIn(s.peers, ids), nil
}

func (s *staticPeers) ForgetPeer(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgotten = append(s.forgotten, id)
}

func (s *staticPeers) forgottenIDs() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.forgotten)
}

func (s *staticPeers) set(peers []Peer, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.peers, s.err = peers, err
}

func (s *staticPeers) callCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// closedTCPAddr returns a 127.0.0.1 TCP address with nothing listening.
func closedTCPAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	return addr
}

func newTestPeers(t *testing.T, g *health.Guard, c clock.Clock, src PeerSource, cfg PeersConfig) *Peers {
	t.Helper()
	cfg.Log = testLogger(t)
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	p, err := NewPeers(g, c, src, cfg)
	if err != nil {
		t.Fatalf("NewPeers: %v", err)
	}
	t.Cleanup(p.Close) // before the peers' servers stop (cleanups run last first)
	return p
}

// unreachable marks a peer that has no server.
const unreachable = time.Duration(1<<63 - 1)

// The majority rule, with the node's own clock counted: peers'
// offsets are relative to it, so its own is 0.
func TestPeersMajority(t *testing.T) {
	for _, tc := range []majorityCase{
		{name: "no peers", wantAgree: 1},
		{name: "2 clocks: the other 5s off: no majority, stays in", offsets: []time.Duration{5 * time.Second},
			wantMedian: 2500 * time.Millisecond, wantReachable: 1, wantAgree: 1, wantSplit: true,
			wantDetailParts: []string{"no majority: 1 of 2 clocks", "worker 1 ", "+5s"}},
		{name: "3 clocks, one 5s off: the majority agrees", offsets: []time.Duration{10 * time.Millisecond, 5 * time.Second},
			wantMedian: 10 * time.Millisecond, wantReachable: 2, wantAgree: 2},
		{name: "3 clocks, this one the outlier", offsets: []time.Duration{-5 * time.Second, -5 * time.Second},
			wantMedian: -5 * time.Second, wantReachable: 2, wantAgree: 1, wantErr: errPeerOffset,
			wantDetailParts: []string{"clock more than 1s from 2 of 3 clocks compared (itself counted): the outlier", "worker 2 ", "-5s (rtt 0s)"}},
		{name: "3 clocks, one down, the other 5s off: no majority", offsets: []time.Duration{unreachable, -5 * time.Second},
			wantMedian: -2500 * time.Millisecond, wantReachable: 1, wantAgree: 1, wantSplit: true},
		{name: "4 clocks, 2 against 2: no majority", offsets: []time.Duration{0, 3 * time.Second, 3 * time.Second},
			wantMedian: 1500 * time.Millisecond, wantReachable: 3, wantAgree: 2, wantSplit: true},
		{name: "5 clocks, two bad ones: a good node stays", offsets: []time.Duration{-5 * time.Second, -5 * time.Second, 0, 20 * time.Millisecond},
			wantReachable: 4, wantAgree: 3},
		{name: "5 clocks, one of two bad ones: the outliers leave", offsets: []time.Duration{0, 5 * time.Second, 5 * time.Second, 5 * time.Second},
			wantMedian: 5 * time.Second, wantReachable: 4, wantAgree: 2, wantErr: errPeerOffset},
		{name: "exactly max agrees", offsets: []time.Duration{time.Second}, wantMedian: 500 * time.Millisecond, wantReachable: 1, wantAgree: 2},
		{name: "unreachable peers do not vote", offsets: []time.Duration{0, 10 * time.Millisecond, unreachable},
			wantMedian: 0, wantReachable: 2, wantAgree: 3},
		{name: "none reachable: pass", offsets: []time.Duration{unreachable, unreachable, unreachable}, wantAgree: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := clocktest.NewFake(t0)
			src := &staticPeers{}
			peers := startOffsetPeers(t, fc, tc.offsets)
			src.set(peers, nil)
			g := newGuard(t)
			p := newTestPeers(t, g, fc, src, PeersConfig{})
			if g.Status().State != health.Starting {
				t.Fatalf("before the first round: %+v, want starting", g.Status())
			}
			snap, err := p.checkNow(context.Background())
			if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Fatalf("checkNow = %v, want %v", err, tc.wantErr)
			}
			tc.checkSnapshot(t, snap, peers)
			tc.checkVerdict(t, g, p, snap)
		})
	}
}

// majorityCase is one row of TestPeersMajority.
type majorityCase struct {
	name            string
	offsets         []time.Duration // one peer each; unreachable: no server
	wantMedian      time.Duration   // over the node itself and the reachable peers
	wantReachable   int
	wantAgree       int // the node itself included
	wantSplit       bool
	wantErr         error
	wantDetailParts []string
}

// startOffsetPeers starts one time peer per offset (a closed address for
// unreachable), worker IDs from 1.
func startOffsetPeers(t *testing.T, fc *clocktest.Fake, offsets []time.Duration) []Peer {
	t.Helper()
	var peers []Peer
	for i, off := range offsets {
		addr := closedTCPAddr(t)
		if off != unreachable {
			addr = startTimePeer(t, fc, off).addr
		}
		peers = append(peers, Peer{WorkerID: int64(i + 1), Addr: addr})
	}
	return peers
}

// checkSnapshot checks the round's counts, median and per-peer results.
func (tc majorityCase) checkSnapshot(t *testing.T, snap PeerSnapshot, peers []Peer) {
	t.Helper()
	if snap.Reachable != tc.wantReachable || snap.Unreachable != len(tc.offsets)-tc.wantReachable ||
		snap.Median != tc.wantMedian || len(snap.Peers) != len(tc.offsets) {
		t.Fatalf("snapshot %+v, want median %v with %d of %d reachable", snap, tc.wantMedian, tc.wantReachable, len(tc.offsets))
	}
	if snap.Agree != tc.wantAgree || snap.Disagree != tc.wantReachable+1-tc.wantAgree || snap.Split != tc.wantSplit {
		t.Fatalf("agree %d disagree %d split %v, want agree %d of %d, split %v", snap.Agree, snap.Disagree, snap.Split,
			tc.wantAgree, tc.wantReachable+1, tc.wantSplit)
	}
	for i, r := range snap.Peers {
		if r.WorkerID != int64(i+1) || r.Addr != peers[i].Addr || r.CheckedAt.IsZero() {
			t.Fatalf("peer %d result %+v does not match %+v", i, r, peers[i])
		}
		if off := tc.offsets[i]; off == unreachable {
			if r.Reachable() || !strings.Contains(r.Error, "GET /time") {
				t.Fatalf("peer %d (no server) result %+v, want an error", i, r)
			}
		} else if r.Offset != off || r.RTT != 0 || !r.Reachable() {
			t.Fatalf("peer %d result %+v, want offset %v (fake clock: rtt 0)", i, r, off)
		}
	}
}

// checkVerdict checks the guard's peer_offset check, its detail and the
// peers' counters after the round.
func (tc majorityCase) checkVerdict(t *testing.T, g *health.Guard, p *Peers, snap PeerSnapshot) {
	t.Helper()
	d, failing := failingDetail(g, health.ReasonPeerOffset)
	if tc.wantSplit {
		d = snap.Detail // a split passes: the detail is in the snapshot
	}
	if failing != (tc.wantErr != nil) || g.Ready() == failing {
		t.Fatalf("peer_offset failing=%v ready=%v, want failing=%v", failing, g.Ready(), tc.wantErr != nil)
	}
	for _, part := range tc.wantDetailParts {
		if !strings.Contains(d, part) {
			t.Fatalf("detail %q lacks %q", d, part)
		}
	}
	if tc.wantSplit {
		if d := p.Snapshot(); d.SplitRounds != 1 {
			t.Fatalf("split rounds %d, want 1", d.SplitRounds)
		}
	}
	if s := p.Snapshot(); s.Rounds != 1 || s.UnreachablePeers != int64(snap.Unreachable) ||
		(s.OffsetFailures == 1) != (tc.wantErr != nil) {
		t.Fatalf("counters %+v", s)
	}
}

// TestPeersBadAnswers: answers that cannot be used count as unreachable.
func TestPeersBadAnswers(t *testing.T) {
	fc := clocktest.NewFake(t0)
	for _, tc := range []struct {
		name       string
		mode       int32
		badAddr    bool // ask addr instead of the server
		addr       string
		wantErr    string
		wantOffset time.Duration
	}{
		{name: "unix_ns", mode: answerNanos, wantOffset: 7 * time.Second},
		{name: "unix_ms only: middle of the millisecond", mode: answerMillis, wantOffset: 7*time.Second + 500*time.Microsecond},
		{name: "status 500", mode: answerStatus500, wantErr: "status 500"},
		{name: "not JSON", mode: answerBadJSON, wantErr: "decode time"},
		{name: "no time fields", mode: answerNoFields, wantErr: "no positive unix_ns or unix_ms"},
		{name: "address without port", badAddr: true, addr: "127.0.0.1", wantErr: "bad peer address"},
		{name: "address with port 0", badAddr: true, addr: "127.0.0.1:0", wantErr: "bad peer address"},
		{name: "empty address", badAddr: true, addr: "", wantErr: "bad peer address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp := startTimePeer(t, fc, 7*time.Second)
			tp.mode.Store(tc.mode)
			addr := tp.addr
			if tc.badAddr {
				addr = tc.addr
			}
			src := &staticPeers{peers: []Peer{{WorkerID: 9, Addr: addr}}}
			p := newTestPeers(t, newGuard(t), fc, src, PeersConfig{MaxOffset: time.Hour})
			snap, err := p.checkNow(context.Background())
			if err != nil {
				t.Fatalf("checkNow: %v", err)
			}
			r := snap.Peers[0]
			if tc.wantErr == "" {
				if !r.Reachable() || r.Offset != tc.wantOffset {
					t.Fatalf("result %+v, want offset %v", r, tc.wantOffset)
				}
				return
			}
			if r.Reachable() || !strings.Contains(r.Error, tc.wantErr) || snap.Unreachable != 1 {
				t.Fatalf("result %+v, want error containing %q", r, tc.wantErr)
			}
		})
	}
}

// TestPeersRTTCorrection: a peer that answers slowly, reading its clock in
// the middle of the delay, is measured at its true offset, not off by half
// the round trip.
func TestPeersRTTCorrection(t *testing.T) {
	sys := clock.NewSystem()
	const offset, delay = 300 * time.Millisecond, 150 * time.Millisecond
	tp := startTimePeer(t, sys, offset)
	tp.delay.Store(int64(delay))
	src := &staticPeers{peers: []Peer{{WorkerID: 1, Addr: tp.addr}}}
	p := newTestPeers(t, newGuard(t), sys, src, PeersConfig{})
	snap, err := p.checkNow(context.Background())
	if err != nil {
		t.Fatalf("checkNow: %v", err)
	}
	r := snap.Peers[0]
	if r.RTT < 2*delay {
		t.Fatalf("rtt %v, want at least %v (the peer sleeps %v twice)", r.RTT, 2*delay, delay)
	}
	// Uncorrected, the offset would be off by about ±delay (150ms).
	requireNear(t, "offset of the slow peer", r.Offset, offset, 50*time.Millisecond)
}

// TestPeersConcurrent: the peers are asked at once. Each peer answers only
// when all three requests have arrived, so a sequential round fails.
func TestPeersConcurrent(t *testing.T) {
	fc := clocktest.NewFake(t0)
	var arrived sync.WaitGroup
	arrived.Add(3)
	all := make(chan struct{})
	go func() { arrived.Wait(); close(all) }()
	var peers []Peer
	for i := range 3 {
		var first sync.Once // a round asks each peer peerSamples times: count the first
		tp := startTimePeerWith(t, fc, time.Duration(i)*time.Millisecond, func() {
			first.Do(arrived.Done)
			select {
			case <-all:
			case <-time.After(waitTimeout):
			}
		})
		peers = append(peers, Peer{WorkerID: int64(i), Addr: tp.addr})
	}
	p := newTestPeers(t, newGuard(t), fc, &staticPeers{peers: peers}, PeersConfig{Timeout: waitTimeout / 2})
	snap, err := p.checkNow(context.Background())
	// Median of the node's own 0 and the peers' 0, 1ms, 2ms.
	if err != nil || snap.Reachable != 3 || snap.Median != 500*time.Microsecond {
		t.Fatalf("checkNow = %+v, %v; want all 3 reachable, median 500µs", snap, err)
	}
}

// TestPeersSourceError: no peer list keeps the previous verdict (a first
// round passes).
func TestPeersSourceError(t *testing.T) {
	fc := clocktest.NewFake(t0)
	// Two peers ahead: with the node itself, two of three clocks disagree.
	ahead := startTimePeer(t, fc, 5*time.Second)
	ahead2 := startTimePeer(t, fc, 5*time.Second)
	src := &staticPeers{err: errors.New("zk: connection closed")}
	g := newGuard(t)
	p := newTestPeers(t, g, fc, src, PeersConfig{})
	steps := []struct {
		peers     []Peer
		srcErr    error
		wantErr   error
		wantReady bool
	}{
		{nil, errors.New("zk: connection closed"), nil, true}, // first round: pass
		{[]Peer{{1, ahead.addr}, {2, ahead2.addr}}, nil, errPeerOffset, false},
		{nil, errors.New("zk: connection closed"), nil, false}, // keeps the failure
		{[]Peer{}, nil, nil, true},                             // no peers: pass
	}
	for i, st := range steps {
		src.set(st.peers, st.srcErr)
		_, err := p.checkNow(context.Background())
		switch {
		case st.srcErr != nil:
			if err == nil || !strings.Contains(err.Error(), "list peers: zk: connection closed") {
				t.Fatalf("round %d: err %v, want the source error", i+1, err)
			}
		case !errors.Is(err, st.wantErr) || (err == nil) != (st.wantErr == nil):
			t.Fatalf("round %d: err %v, want %v", i+1, err, st.wantErr)
		}
		if g.Ready() != st.wantReady {
			t.Fatalf("round %d: ready %v, want %v (%+v)", i+1, g.Ready(), st.wantReady, g.Status())
		}
	}
	s := p.Snapshot()
	if s.Rounds != 4 || s.SourceErrors != 2 || s.OffsetFailures != 1 || s.SourceError != "" || len(s.Peers) != 0 {
		t.Fatalf("snapshot %+v", s)
	}
}

func TestPeersRunFirstRoundAtOnceThenEveryInterval(t *testing.T) {
	fc := clocktest.NewFake(t0)
	tp := startTimePeer(t, fc, 0)
	for _, tc := range []struct {
		name      string
		interval  time.Duration
		wantCalls int
	}{
		{"first round at once (interval 1h)", time.Hour, 1},
		{"then every interval (1ms)", time.Millisecond, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &staticPeers{peers: []Peer{{WorkerID: 1, Addr: tp.addr}}}
			g := newGuard(t)
			p := newTestPeers(t, g, fc, src, PeersConfig{Interval: tc.interval})
			stop := runInBackground(t, p.Run)
			waitFor(t, strconv.Itoa(tc.wantCalls)+" rounds", func() bool { return p.Snapshot().Rounds >= int64(tc.wantCalls) })
			if !g.Ready() {
				t.Fatalf("not ready after a passing round: %+v", g.Status())
			}
			stop()
		})
	}
}

// TestPeersRunStopsDuringRound: a source blocked until ctx ends lets Run
// return, and the interrupted round gives no verdict.
func TestPeersRunStopsDuringRound(t *testing.T) {
	started := make(chan struct{}, 1)
	src := peerListFunc(func(ctx context.Context) ([]Peer, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	g := newGuard(t)
	p := newTestPeers(t, g, clocktest.NewFake(t0), src, PeersConfig{})
	stop := runInBackground(t, p.Run)
	select {
	case <-started:
	case <-time.After(waitTimeout):
		t.Fatal("first round did not start")
	}
	stop()
	if g.Status().State != health.Starting || p.Snapshot().Rounds != 0 {
		t.Fatalf("an interrupted round gave a verdict: %+v %+v", g.Status(), p.Snapshot())
	}
}

func TestNewPeersConfigErrors(t *testing.T) {
	fc := clocktest.NewFake(t0)
	src := &staticPeers{}
	for _, tc := range []struct {
		name string
		c    clock.Clock
		src  PeerSource
		cfg  PeersConfig
	}{
		{"nil clock", nil, src, PeersConfig{}},
		{"nil source", fc, nil, PeersConfig{}},
		{"negative interval", fc, src, PeersConfig{Interval: -1}},
		{"negative max offset", fc, src, PeersConfig{MaxOffset: -1}},
		{"negative timeout", fc, src, PeersConfig{Timeout: -1}},
		{"negative concurrency", fc, src, PeersConfig{Concurrency: -1}},
		{"negative sample", fc, src, PeersConfig{Sample: -1}},
		{"sample of 1", fc, src, PeersConfig{Sample: 1}},
		{"sample of 2: one bad peer would be a third of the votes", fc, src, PeersConfig{Sample: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPeers(newGuard(t), tc.c, tc.src, tc.cfg)
			if !errors.Is(err, errBadConfig) || p != nil {
				t.Fatalf("NewPeers = %v, %v; want nil, ErrBadConfig", p, err)
			}
		})
	}
}

func TestPeersDefaults(t *testing.T) {
	p, err := NewPeers(newGuard(t), clocktest.NewFake(t0), &staticPeers{}, PeersConfig{})
	if err != nil {
		t.Fatalf("NewPeers: %v", err)
	}
	c := p.cfg
	if c.Interval != DefaultPeerInterval || c.MaxOffset != DefaultPeerMaxOffset || c.Timeout != defaultPeerTimeout ||
		c.Concurrency != defaultPeerConcurrency || c.Sample != DefaultPeerSample || p.sampler.size != DefaultPeerSample || p.sched.jitter == nil {
		t.Fatalf("defaults not applied: %+v", c)
	}
}

func TestMedianOf(t *testing.T) {
	for _, tc := range []struct {
		in   []time.Duration
		want time.Duration
	}{
		{nil, 0},
		{[]time.Duration{3}, 3},
		{[]time.Duration{3, 1, 2}, 2},
		{[]time.Duration{4, 1, 3, 2}, 2},
		{[]time.Duration{-5, 5}, 0},
		{[]time.Duration{1<<62 + 2, 1<<62 + 4}, 1<<62 + 3}, // no overflow
	} {
		if got := medianOf(tc.in); got != tc.want {
			t.Errorf("medianOf(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestPeersRunRechecksAVerdictAgainstTheNode: with an hour's interval, a
// verdict that keeps the node out is re-checked soon, whatever the round
// that left it found: peers whose clocks were off (a fresh verdict: they
// are set right meanwhile) or no peer list at all (ZooKeeper electing a
// leader when the jump guard re-asks). The node returns within RetryMax of
// the cause going; a verdict that lets the node in is not re-checked.
func TestPeersRunRechecksAVerdictAgainstTheNode(t *testing.T) {
	fc := clocktest.NewFake(t0)
	for _, tc := range []struct {
		name      string
		aheadBy   time.Duration // the two peers' clocks at the first round
		noList    bool          // a round after the first gets no peer list
		wantReady bool          // after the first round
	}{
		{"fresh verdict: the peers' clocks are set right", 5 * time.Second, false, false},
		{"stale verdict: the peer list comes back", 5 * time.Second, true, false},
		{"a verdict for the node: not re-checked", 0, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := startTimePeer(t, fc, tc.aheadBy), startTimePeer(t, fc, tc.aheadBy)
			peers := []Peer{{1, a.addr}, {2, b.addr}}
			src := &staticPeers{peers: peers}
			g := newGuard(t)
			p := newTestPeers(t, g, fc, src, PeersConfig{Interval: time.Hour})
			if tc.aheadBy == 0 {
				stop := runInBackground(t, p.Run)
				t.Cleanup(stop)
				waitFor(t, "the first round", func() bool { return p.Snapshot().Rounds >= 1 })
				time.Sleep(4 * retryFirst)
				if n := src.callCount(); n != 1 || !g.Ready() {
					t.Fatalf("%d rounds in %v with an hour's interval (want 1), ready %v", n, 4*retryFirst, g.Ready())
				}
				return
			}
			if tc.noList {
				// The first round judges the node out; every later one
				// gets no list until it is back.
				if _, err := p.checkNow(context.Background()); !errors.Is(err, errPeerOffset) {
					t.Fatalf("first round: %v, want the outlier", err)
				}
				src.set(nil, errors.New("zk: no server"))
			}
			stop := runInBackground(t, p.Run)
			t.Cleanup(stop)
			waitFor(t, "a verdict against the node", func() bool { return p.Snapshot().Rounds >= 2 && !g.Ready() })
			rounds := p.Snapshot().Rounds
			a.offset.Store(0)
			b.offset.Store(0)
			src.set(peers, nil)
			waitFor(t, "the node back in", g.Ready)
			if s := p.Snapshot(); s.Rounds-rounds > 4 || s.outlier() {
				t.Fatalf("back after %d more rounds (want a few: the backoff caps at %v): %+v", s.Rounds-rounds, RetryMax, s)
			}
		})
	}
}

// TestJudgeOffset: a comparison carries its uncertainty, half the round
// trip: it agrees only when the offset plus that is within the limit,
// disagrees only when the offset minus that is beyond it.
func TestJudgeOffset(t *testing.T) {
	for _, tc := range []struct {
		offset, rtt time.Duration
		want        string
	}{
		{0, 0, judgedAgrees},
		{time.Second, 0, judgedAgrees},
		{time.Second + 1, 0, judgedDisagrees},
		{-700 * time.Millisecond, 600 * time.Millisecond, judgedAgrees},     // 700+300 = 1s: within
		{-701 * time.Millisecond, 600 * time.Millisecond, judgedUnsure},     // could be 1.001s
		{-650 * time.Millisecond, 1300 * time.Millisecond, judgedUnsure},    // the stall: could be 0 or 1.3s
		{1600 * time.Millisecond, 1200 * time.Millisecond, judgedUnsure},    // 1600-600 = 1s: not beyond
		{1601 * time.Millisecond, 1200 * time.Millisecond, judgedDisagrees}, // beyond whatever the path
	} {
		if got := judgeOffset(tc.offset, tc.rtt, time.Second); got != tc.want {
			t.Errorf("judgeOffset(%v, rtt %v, max 1s) = %s, want %s", tc.offset, tc.rtt, got, tc.want)
		}
	}
}

// TestPeersStallIsNotAnOffset: a pause between the peer reading its clock
// and the node reading the answer (here the peer's; a stall of this
// process looks the same) used to shift every peer by minus half of it:
// three peers whose clocks equal this one's, stalled 400ms with a 150ms
// limit, made this node the outlier. With the uncertainty counted they are
// unsure and the node stays in; and when only the first sample of each
// connection stalls, the best of peerSamples finds the true offset.
func TestPeersStallIsNotAnOffset(t *testing.T) {
	sys := clock.NewSystem()
	const stall, maxOffset = 400 * time.Millisecond, 150 * time.Millisecond
	for _, tc := range []struct {
		name       string
		stallFirst int64 // 0: every sample
		wantJudged string
	}{
		{"every sample stalled: unsure, not the outlier", 0, judgedUnsure},
		{"the first sample stalled: the best sample agrees", 1, judgedAgrees},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var peers []Peer
			for i := range 3 {
				tp := startTimePeer(t, sys, 0)
				tp.stall.Store(int64(stall))
				tp.stallFirst.Store(tc.stallFirst)
				peers = append(peers, Peer{WorkerID: int64(i + 1), Addr: tp.addr})
			}
			g := newGuard(t)
			p := newTestPeers(t, g, sys, &staticPeers{peers: peers}, PeersConfig{MaxOffset: maxOffset})
			snap, err := p.checkNow(context.Background())
			if err != nil || !g.Ready() || snap.outlier() {
				t.Fatalf("checkNow = %v, ready %v: a node whose clock equals its peers' judged off (%+v)", err, g.Ready(), snap)
			}
			for _, r := range snap.Peers {
				if r.Judged != tc.wantJudged {
					t.Fatalf("peer %s judged %q (offset %v, rtt %v), want %q", r.Addr, r.Judged, r.Offset, r.RTT, tc.wantJudged)
				}
				if tc.wantJudged == judgedAgrees && r.RTT >= stall {
					t.Fatalf("peer %s: rtt %v, want the unstalled sample's (below %v)", r.Addr, r.RTT, stall)
				}
			}
		})
	}
}

// TestPeersSamplesOneConnection: a round asks each peer peerSamples times,
// over one connection (so no dial is inside a measured round trip).
func TestPeersSamplesOneConnection(t *testing.T) {
	fc := clocktest.NewFake(t0)
	tp := startTimePeer(t, fc, 0)
	src := &staticPeers{peers: []Peer{{WorkerID: 1, Addr: tp.addr}}}
	p := newTestPeers(t, newGuard(t), fc, src, PeersConfig{})
	if _, err := p.checkNow(context.Background()); err != nil {
		t.Fatalf("checkNow: %v", err)
	}
	n := 0
	tp.conns.Range(func(any, any) bool { n++; return true })
	if got := tp.requests.Load(); got != peerSamples || n != 1 {
		t.Fatalf("%d requests over %d connections, want %d over 1", got, n, peerSamples)
	}
}

// TestPeersMeasuredSince: a confirmation counts only when measured after
// the event. A round without a peer list, or with no peer reachable,
// measured nothing, though it ends later than the last one that did.
func TestPeersMeasuredSince(t *testing.T) {
	fc := clocktest.NewFake(t0)
	tp := startTimePeer(t, fc, 0)
	src := &staticPeers{peers: []Peer{{WorkerID: 1, Addr: tp.addr}}}
	p := newTestPeers(t, newGuard(t), fc, src, PeersConfig{})
	if p.Snapshot().measuredSince(0) {
		t.Fatal("measured before any round")
	}
	if _, err := p.checkNow(context.Background()); err != nil {
		t.Fatalf("checkNow: %v", err)
	}
	fc.Advance(time.Second)
	event := fc.Mono()
	if s := p.Snapshot(); !s.measuredSince(0) || s.measuredSince(event) {
		t.Fatalf("after a good round before the event: since 0 %v, since the event %v; want true, false", s.measuredSince(0), s.measuredSince(event))
	}
	for _, step := range []struct {
		name  string
		peers []Peer
		err   error
		want  bool
	}{
		{"no peer list", nil, errors.New("zk: connection closed"), false},
		{"no peer reachable", []Peer{{WorkerID: 2, Addr: closedTCPAddr(t)}}, nil, false},
		{"no peers", []Peer{}, nil, false},
		{"a peer answers", []Peer{{WorkerID: 1, Addr: tp.addr}}, nil, true},
	} {
		src.set(step.peers, step.err)
		_, _ = p.checkNow(context.Background())
		if got := p.Snapshot().measuredSince(event); got != step.want {
			t.Fatalf("%s after the event: measured %v, want %v", step.name, got, step.want)
		}
	}
}
