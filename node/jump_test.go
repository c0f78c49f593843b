package node

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/clock/clocktest"
	"codeberg.org/snowflaked/snowflaked/clockguard"
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
	judged   bool // its last verdict is against this node
}

func (f *fakeConfirmer) against() bool { return f.judged }

func (f *fakeConfirmer) enabled() bool { return true }
func (f *fakeConfirmer) recheck(context.Context) {
	f.rechecks++
	if f.answers {
		f.answered, f.at = true, f.clk.Mono()
	}
}
func (f *fakeConfirmer) verdict(sinceMono time.Duration) (bool, bool) {
	if !f.answered || f.at < sinceMono {
		return false, false
	}
	return true, f.agrees
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
			g := clockguard.New(zerolog.Nop(), nil)
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
			if jumped && g.Status().Reason != clockguard.ReasonClockJump {
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

// A step the jump guard accepts (within the headroom, or backward) makes a
// source whose verdict is against this node look again: a node judged the
// outlier on its old clock (peer_offset) must not wait for the next regular
// round (an hour in the chaos runs) once its clock is set right. A source
// that passes is not asked (a step alone never takes a node out sooner),
// and small drifts ask nobody.
func TestJumpGuardReasksAfterAStep(t *testing.T) {
	for _, tc := range []struct {
		name    string
		step    time.Duration
		against bool
		want    int
	}{
		{"forward within the headroom, judged against", 1600 * time.Millisecond, true, 1},
		{"backward, judged against", -1500 * time.Millisecond, true, 1},
		{"a step, the source passes", -1500 * time.Millisecond, false, 0},
		{"a drift below reaskStep", reaskStep / 2, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktest.NewFake(time.UnixMilli(1_750_000_000_000))
			cf := &fakeConfirmer{clk: clk, answers: true, agrees: true, judged: tc.against}
			j := newJumpGuard(clockguard.New(zerolog.Nop(), nil), clk, 3*time.Second, zerolog.Nop(), cf)
			clk.Advance(time.Second)
			j.step()
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
	src := clockguard.PeerSourceFunc(func(context.Context) ([]clockguard.Peer, error) {
		if err, _ := listErr.Load().(error); err != nil {
			return nil, err
		}
		return []clockguard.Peer{{WorkerID: 1, Addr: strings.TrimPrefix(srv.URL, "http://")}}, nil
	})
	g := clockguard.New(zerolog.Nop(), nil)
	peers, err := clockguard.NewPeers(g, clk, src, clockguard.PeersConfig{Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if s, err := peers.CheckNow(ctx); err != nil || s.Reachable != 1 || s.Disagree != 0 {
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
