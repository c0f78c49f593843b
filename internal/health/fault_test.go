package health

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestFault(t *testing.T) {
	g := newGuard(t)
	var fixed atomic.Bool
	var f *Fault
	var tripDuringClear atomic.Bool
	f = NewFault(g, ReasonTimeOverflow, func() bool {
		if tripDuringClear.Load() {
			f.Trip("again, while clearing")
		}
		return fixed.Load()
	}, 0)
	if !g.Ready() {
		t.Fatalf("a new fault must pass: %+v", g.Status())
	}
	steps := []struct {
		name        string
		do          func()
		wantTripped bool
	}{
		{"trip", func() { f.Trip("clock past the end") }, true},
		{"clear while still broken", func() { f.TryClear() }, true},
		{"a Trip racing the clear keeps it failing", func() { fixed.Store(true); tripDuringClear.Store(true); f.TryClear() }, true},
		{"clear once fixed", func() { tripDuringClear.Store(false); f.TryClear() }, false},
		{"clear when not tripped is a no-op", func() { f.TryClear() }, false},
	}
	for _, s := range steps {
		s.do()
		if f.Tripped() != s.wantTripped {
			t.Fatalf("%s: tripped %v, want %v", s.name, f.Tripped(), s.wantTripped)
		}
		d, failing := failingDetail(g, ReasonTimeOverflow)
		if failing != s.wantTripped || g.Ready() == s.wantTripped {
			t.Fatalf("%s: failing %v (%q), ready %v", s.name, failing, d, g.Ready())
		}
		if failing && d != "clock past the end" {
			t.Fatalf("%s: detail %q, want the first trip's", s.name, d)
		}
	}
}

// One loop clears every fault of a group: a Trip of any wakes it at once,
// each clears when its own condition holds, and one that stays broken keeps
// failing beside them.
func TestFaultsOneLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGuard(t)
		fs := NewFaults(time.Hour) // only a Trip wakes the loop within the test
		var okA, okB atomic.Bool
		a := fs.Add(g, ReasonTimeOverflow, okA.Load)
		b := fs.Add(g, ReasonClockStalled, okB.Load)
		if !g.Ready() {
			t.Fatalf("new faults must pass: %+v", g.Status())
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); fs.Run(ctx) }()

		a.Trip("a broken")
		b.Trip("b broken")
		synctest.Wait()
		if !a.Tripped() || !b.Tripped() || g.Ready() {
			t.Fatalf("both broken: tripped %v %v, ready %v", a.Tripped(), b.Tripped(), g.Ready())
		}
		okA.Store(true)
		b.Trip("b still broken") // wakes the loop: a clears, b stays
		synctest.Wait()
		if a.Tripped() || !b.Tripped() || g.Ready() {
			t.Fatalf("a fixed: tripped %v %v, ready %v", a.Tripped(), b.Tripped(), g.Ready())
		}
		okB.Store(true)
		time.Sleep(time.Hour) // the ticker: no Trip needed
		synctest.Wait()
		if a.Tripped() || b.Tripped() || !g.Ready() {
			t.Fatalf("both fixed: tripped %v %v, ready %v", a.Tripped(), b.Tripped(), g.Ready())
		}
		cancel()
		<-done
	})
}
