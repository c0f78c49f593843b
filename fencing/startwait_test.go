package fencing

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/internal/clock/clocktest"
	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

func TestStartWait(t *testing.T) {
	start := time.UnixMilli(1_750_000_000_000)
	tests := []struct {
		name       string
		ahead      time.Duration // fence minus now at start
		maxWait    time.Duration
		wantFail   bool          // the check fails (rather than stays pending) while waiting
		goBackMid  time.Duration // wall step back after the first poll
		wantDetail []string
	}{
		{name: "no fence", ahead: -1},
		{name: "fence in the past", ahead: -time.Hour, maxWait: 10 * time.Second},
		{name: "slightly behind waits pending", ahead: 2 * time.Second, maxWait: 10 * time.Second},
		{name: "far behind fails with figures", ahead: time.Hour, maxWait: 10 * time.Second, wantFail: true,
			wantDetail: []string{"1h0m0s behind the fence", "max-start-wait 10s"}},
		{name: "zero max wait fails at once", ahead: 50 * time.Millisecond, maxWait: 0, wantFail: true},
		{name: "clock going back during the wait fails", ahead: 2 * time.Second, maxWait: 10 * time.Second,
			goBackMid: time.Minute, wantFail: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktest.NewFake(start)
			g := health.New(zerolog.Nop(), nil)
			var readyAt time.Time
			if tc.ahead != -1 {
				readyAt = start.Add(tc.ahead)
			}
			gate := NewStartWait(g, clk, readyAt, tc.maxWait, zerolog.Nop())
			sub := g.Subscribe()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan time.Duration, 1)
			go func() { done <- gate.Run(ctx) }()

			if tc.ahead <= 0 {
				select {
				case <-done:
				case <-time.After(5 * time.Second):
					t.Fatal("gate did not pass at once")
				}
				if !g.Ready() {
					t.Fatalf("not ready: %+v", g.Status())
				}
				return
			}
			// Let Run make its first decision, then check the state.
			deadline := time.Now().Add(5 * time.Second)
			if tc.goBackMid > 0 {
				// Whether Run is already waiting or not, a clock now far
				// behind the fence must fail the check.
				clk.StepWall(-tc.goBackMid)
			}
			for tc.wantFail && g.Status().State != health.OutOfService {
				if time.Now().After(deadline) {
					t.Fatalf("state %+v, want out of service", g.Status())
				}
				select {
				case <-sub:
				case <-time.After(10 * time.Millisecond):
				}
			}
			st := g.Status()
			if tc.wantFail {
				if st.Reason != health.ReasonClockBehindFence {
					t.Errorf("reason %q, want %q", st.Reason, health.ReasonClockBehindFence)
				}
			} else if st.State != health.Starting {
				t.Errorf("state %+v, want starting (pending)", st)
			}
			for _, s := range tc.wantDetail {
				if !strings.Contains(st.Detail, s) {
					t.Errorf("detail %q does not contain %q", st.Detail, s)
				}
			}
			// Move the clock past the fence: the gate passes for good.
			clk.Advance(tc.ahead + tc.goBackMid + time.Millisecond)
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatalf("gate did not pass after the clock passed the fence: %+v", g.Status())
			}
			if !g.Ready() {
				t.Fatalf("not ready: %+v", g.Status())
			}
		})
	}
}

func TestStartWaitStopsWithContext(t *testing.T) {
	clk := clocktest.NewFake(time.UnixMilli(1_750_000_000_000))
	g := health.New(zerolog.Nop(), nil)
	gate := NewStartWait(g, clk, time.Unix(0, clk.WallNanos()).Add(time.Hour), time.Second, zerolog.Nop())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { gate.Run(ctx); close(done) }()
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if g.Ready() {
		t.Fatal("ready although the clock never passed the fence")
	}
}

// Waiting for the previous holder's ZooKeeper fence (a fence this node's
// disk did not write) is part of a normal start, never a clock fault: the
// node is starting with reason prev_holder_fence and the holder, fence and
// time left, for up to --zk-fence-ahead + max-start-wait. Only beyond that
// (or when the clock goes back during the wait) is it clock_behind_fence.
func TestStartWaitPrevHolder(t *testing.T) {
	start := time.UnixMilli(1_750_000_000_000)
	const zkAhead, maxWait = 30 * time.Second, 10 * time.Second
	holder := PrevHolder{NodeKey: "node-a", Addr: "10.0.0.1:8080", Token: "tok-1", ZKFenceAhead: zkAhead}
	tests := []struct {
		name       string
		ahead      time.Duration // fence minus now at start
		goBackMid  time.Duration // wall step back while waiting
		wantReason health.Reason
		wantState  health.State
		wantDetail []string
		wantLeft   bool // PrevHolderWait reports time left
	}{
		{name: "within max-start-wait", ahead: 5 * time.Second, wantReason: health.ReasonPrevHolderFence, wantState: health.Starting,
			wantDetail: []string{"previous holder's ZooKeeper fence", `node key "node-a" at 10.0.0.1:8080, token tok-1`, "5s left"}, wantLeft: true},
		{name: "beyond max-start-wait, within zk-fence-ahead", ahead: 25 * time.Second, wantReason: health.ReasonPrevHolderFence,
			wantState: health.Starting, wantDetail: []string{"25s left"}, wantLeft: true},
		{name: "beyond zk-fence-ahead + max-start-wait: a clock's fault", ahead: time.Hour, wantReason: health.ReasonClockBehindFence,
			wantState: health.OutOfService, wantDetail: []string{"1h0m0s behind the previous holder's ZooKeeper fence", "node-a", "this clock is behind, or the previous holder's was ahead"}},
		{name: "the clock goes back during the wait", ahead: 5 * time.Second, goBackMid: time.Hour, wantReason: health.ReasonClockBehindFence,
			wantState: health.OutOfService},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktest.NewFake(start)
			g := health.New(zerolog.Nop(), nil)
			h := holder
			h.Fence = snowflake.UnixMilliOf(start.Add(tc.ahead))
			gate := NewPrevHolderWait(g, clk, start.Add(tc.ahead), maxWait, h, zerolog.Nop())
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan time.Duration, 1)
			go func() { done <- gate.Run(ctx) }()
			if tc.goBackMid > 0 {
				waitState(t, g, health.Starting, health.ReasonPrevHolderFence)
				clk.StepWall(-tc.goBackMid)
			}
			st := waitState(t, g, tc.wantState, tc.wantReason)
			for _, s := range tc.wantDetail {
				if !strings.Contains(st.Detail, s) {
					t.Errorf("detail %q does not contain %q", st.Detail, s)
				}
			}
			if left, got := gate.PrevHolderWait(); (left > 0) != tc.wantLeft || got.NodeKey != "node-a" {
				t.Errorf("PrevHolderWait %v %+v, want time left %v", left, got, tc.wantLeft)
			}
			if tr := g.Transitions(); tc.wantReason == health.ReasonPrevHolderFence && tr[health.ReasonClockBehindFence] != 0 {
				t.Errorf("transitions %v: a clock reason while waiting for the previous holder", tr)
			}
			clk.Advance(tc.ahead + tc.goBackMid + time.Millisecond)
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatalf("gate did not pass after the clock passed the fence: %+v", g.Status())
			}
			if !g.Ready() {
				t.Fatalf("not ready: %+v", g.Status())
			}
			if left, _ := gate.PrevHolderWait(); left != 0 {
				t.Errorf("PrevHolderWait %v after the fence passed", left)
			}
		})
	}
}

// waitState polls the guard until it is in state with reason.
func waitState(t *testing.T, g *health.Guard, state health.State, reason health.Reason) health.Status {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := g.Status()
		if st.State == state && st.Reason == reason {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("status %+v, want %s %s", st, state, reason)
		}
		time.Sleep(time.Millisecond)
	}
}

// A normal start's wait (the clock within --max-start-wait of the fence)
// says in words what it waits for and how long, under reason starting:
// not "waiting for clock_behind_fence", which reads as a clock fault.
func TestStartWaitSaysWhatItWaitsFor(t *testing.T) {
	start := time.UnixMilli(1_750_000_000_000)
	clk := clocktest.NewFake(start)
	g := health.New(zerolog.Nop(), nil)
	gate := NewStartWait(g, clk, start.Add(400*time.Millisecond), 10*time.Second, zerolog.Nop())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan time.Duration, 1)
	go func() { done <- gate.Run(ctx) }()
	const want = "waiting for the clock to pass the fence written before the restart: 400ms left"
	deadline := time.Now().Add(2 * time.Second)
	for st := g.Status(); !strings.Contains(st.Detail, want); st = g.Status() {
		if time.Now().After(deadline) {
			t.Fatalf("status %+v; want state starting, detail with %q", st, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if st := g.Status(); st.State != health.Starting || st.Reason != health.ReasonStarting || strings.Contains(st.Detail, "clock_behind_fence") {
		t.Errorf("status %+v; want starting, reason %q, no reason code in the words", st, health.ReasonStarting)
	}
	clk.Advance(401 * time.Millisecond)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("gate did not pass after the clock passed the fence: %+v", g.Status())
	}
	if !g.Ready() {
		t.Fatalf("not ready: %+v", g.Status())
	}
}
