package health

import (
	"sync/atomic"
	"testing"
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
