package health

import (
	"maps"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
)

// A check that waits says what the node waits for: while it is the first
// pending check the node is starting with its reason and detail (not
// "waiting for <reason>"), a transition only when the reason changes, and
// it leaves the state to a failing check and to the next pending one.
func TestCheckWait(t *testing.T) {
	tests := []struct {
		name       string
		run        func(a, b *Check)
		wantState  State
		wantReason Reason
		wantDetail string
	}{
		{"pending checks", func(a, b *Check) {}, Starting, ReasonStarting, "waiting for " + string(ReasonPrevHolderFence)},
		{"the first pending check waits", func(a, b *Check) { a.Wait("3s left") }, Starting, ReasonPrevHolderFence, "3s left"},
		{"a later pending check waits", func(a, b *Check) { a.Pass(); b.Wait("a detail") }, Starting, ReasonLeaseLost, "a detail"},
		{"the waiting check is not the first pending one", func(a, b *Check) { b.Wait("a detail") }, Starting, ReasonStarting, "waiting for " + string(ReasonPrevHolderFence)},
		{"a failing check goes first", func(a, b *Check) { a.Wait("3s left"); b.Fail("lost") }, OutOfService, ReasonLeaseLost, "lost"},
		{"the wait ends", func(a, b *Check) { a.Wait("3s left"); a.Pass(); b.Pass() }, InService, ReasonNone, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := newGuard(t)
			a, b := g.Check(ReasonPrevHolderFence), g.Check(ReasonLeaseLost)
			tc.run(a, b)
			st := g.Status()
			if st.State != tc.wantState || st.Reason != tc.wantReason || st.Detail != tc.wantDetail {
				t.Fatalf("status %+v, want %s %s %q", st, tc.wantState, tc.wantReason, tc.wantDetail)
			}
			if g.Ready() != (tc.wantState == InService) {
				t.Fatalf("ready %v in state %s", g.Ready(), st.State)
			}
		})
	}

	// Only the reason counts as a transition: the time left changing is not.
	g := newGuard(t)
	c := g.Check(ReasonPrevHolderFence)
	for _, d := range []string{"3s left", "2.9s left", "2.8s left"} {
		c.Wait(d)
	}
	if n := g.Transitions()[ReasonPrevHolderFence]; n != 1 {
		t.Fatalf("%d transitions to prev_holder_fence for one wait, want 1", n)
	}
	if st := g.Status(); st.Detail != "2.8s left" {
		t.Fatalf("detail %q, want the latest", st.Detail)
	}
}

func TestStateText(t *testing.T) {
	for _, st := range States {
		b, err := st.MarshalText()
		if err != nil {
			t.Fatalf("MarshalText(%v): %v", st, err)
		}
		var back State
		if err := back.UnmarshalText(b); err != nil || back != st {
			t.Fatalf("round trip of %v via %q = %v, %v", st, b, back, err)
		}
	}
	var s State
	if err := s.UnmarshalText([]byte("sleeping")); err == nil {
		t.Fatal("UnmarshalText accepted an unknown state")
	}
}

// A snapshot agrees with Status, Failing and Transitions read one by one,
// and counts entries into service under TransitionsInServiceKey.
func TestSnapshot(t *testing.T) {
	tests := []struct {
		name            string
		run             func(a, b *Check)
		wantState       State
		wantFailing     map[Reason]string
		wantTransitions map[string]int64
	}{
		{"pending", func(a, b *Check) {}, Starting, map[Reason]string{}, map[string]int64{}},
		{"in service", func(a, b *Check) { a.Pass(); b.Pass() }, InService, map[Reason]string{},
			map[string]int64{TransitionsInServiceKey: 1}},
		{"one fails", func(a, b *Check) { a.Pass(); b.Pass(); b.Fail("lost") }, OutOfService,
			map[Reason]string{ReasonLeaseLost: "lost"}, map[string]int64{TransitionsInServiceKey: 1, string(ReasonLeaseLost): 1}},
		{"both fail, back in service", func(a, b *Check) { a.Fail("behind"); b.Fail("lost"); a.Pass(); b.Pass() }, InService,
			map[Reason]string{}, map[string]int64{string(ReasonClockRollback): 1, string(ReasonLeaseLost): 1, TransitionsInServiceKey: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := newGuard(t)
			a, b := g.Check(ReasonClockRollback), g.Check(ReasonLeaseLost)
			tc.run(a, b)
			s := g.Snapshot()
			if s.Status != g.Status() || s.Status.State != tc.wantState {
				t.Fatalf("snapshot status %+v, guard status %+v, want state %s", s.Status, g.Status(), tc.wantState)
			}
			if !maps.Equal(s.Failing, tc.wantFailing) || !maps.Equal(s.Failing, g.Failing()) {
				t.Fatalf("snapshot failing %v, guard failing %v, want %v", s.Failing, g.Failing(), tc.wantFailing)
			}
			if !maps.Equal(s.Transitions, tc.wantTransitions) {
				t.Fatalf("snapshot transitions %v, want %v", s.Transitions, tc.wantTransitions)
			}
		})
	}
}

// The time spent in the previous state is never negative, however the wall
// clock (now) steps: it is measured on the monotonic clock.
func TestInPreviousStateMonotonic(t *testing.T) {
	for _, tc := range []struct {
		name string
		step time.Duration
	}{
		{"wall clock stepped back", -5 * time.Second},
		{"wall clock stepped forward", time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf testsupport.SyncBuffer
			wall := time.Unix(1_700_000_000, 0)
			g := New(zerolog.New(&buf), func() time.Time { return wall })
			c := g.Check(ReasonClockRollback)
			wall = wall.Add(tc.step)
			c.Pass()
			lines := buf.Lines(t, "service state changed")
			if len(lines) != 1 {
				t.Fatalf("%d transitions logged, want 1:\n%s", len(lines), buf.String())
			}
			ms, ok := lines[0]["in_previous_state_ms"].(float64)
			if !ok || ms < 0 {
				t.Fatalf("in_previous_state_ms %v, want a duration of 0 or more:\n%s", lines[0]["in_previous_state_ms"], buf.String())
			}
			// Not the wall clock's step: the guard was created just now.
			if got := time.Duration(ms * float64(time.Millisecond)); got > time.Minute {
				t.Errorf("in_previous_state_ms %v: the wall clock's step %v, not the time spent", ms, tc.step)
			}
		})
	}
}
