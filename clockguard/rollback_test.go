package clockguard

import (
	"strings"
	"sync"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/health"
)

// fakeBehinder reports a settable lag and can run a hook inside Behind, to
// place a Trip exactly between Run's reading and its verdict.
type fakeBehinder struct {
	mu     sync.Mutex
	behind time.Duration
	calls  int
	hook   func(call int) // called (without the lock) on every Behind
}

func (f *fakeBehinder) Behind() time.Duration {
	f.mu.Lock()
	f.calls++
	n, hook, b := f.calls, f.hook, f.behind
	f.mu.Unlock()
	if hook != nil {
		hook(n)
	}
	return b
}

func (f *fakeBehinder) set(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.behind = d
}

func (f *fakeBehinder) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func TestRollbackClearOnlyWhenCaughtUp(t *testing.T) {
	for _, tc := range []struct {
		name        string
		behind      time.Duration
		wantTripped bool
	}{
		{"still behind", 2 * time.Second, true},
		{"1ns behind", time.Nanosecond, true},
		{"caught up", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGuard(t)
			b := &fakeBehinder{behind: tc.behind}
			r := NewRollback(g, b, time.Millisecond)
			if !g.Ready() {
				t.Fatalf("guard not ready after NewRollback: %+v", g.Status())
			}
			r.Trip(3*time.Second, "generator")
			if g.Ready() || !r.tripped() {
				t.Fatalf("after Trip: ready=%v tripped=%v, want not ready and tripped", g.Ready(), r.tripped())
			}
			st := g.Status()
			if st.Reason != health.ReasonClockRollback || !strings.Contains(st.Detail, "generator: clock 3s behind") {
				t.Fatalf("status after Trip = %+v, want reason %q with the figures", st, health.ReasonClockRollback)
			}
			r.f.TryClear()
			if r.tripped() != tc.wantTripped || g.Ready() == tc.wantTripped {
				t.Fatalf("after TryClear with Behind()=%v: tripped=%v ready=%v, want tripped=%v",
					tc.behind, r.tripped(), g.Ready(), tc.wantTripped)
			}
		})
	}
}

// TestRollbackTripDuringClearIsNotLost places a Trip between TryClear's
// reading of Behind()==0 and its verdict: the trip must survive.
func TestRollbackTripDuringClearIsNotLost(t *testing.T) {
	g := newGuard(t)
	b := &fakeBehinder{}
	r := NewRollback(g, b, time.Millisecond)
	r.Trip(10*time.Millisecond, "generator")
	b.hook = func(call int) {
		if call == 1 {
			r.Trip(2*time.Second, "watcher") // lands after Behind()==0 was decided
		}
	}
	r.f.TryClear()
	if !r.tripped() || g.Ready() {
		t.Fatalf("a Trip during the clear was lost: tripped=%v ready=%v", r.tripped(), g.Ready())
	}
	if d, _ := failingDetail(g, health.ReasonClockRollback); !strings.Contains(d, "watcher: clock 2s behind") {
		t.Fatalf("detail = %q, want the racing trip's figures", d)
	}
	// The next round, with no Trip in between, clears it.
	r.f.TryClear()
	if r.tripped() || !g.Ready() {
		t.Fatalf("second TryClear: tripped=%v ready=%v, want cleared", r.tripped(), g.Ready())
	}
}

func TestRollbackDetailKeepsLargest(t *testing.T) {
	g := newGuard(t)
	r := NewRollback(g, &fakeBehinder{behind: time.Second}, time.Millisecond)
	for _, trip := range []struct {
		behind time.Duration
		source string
	}{
		{time.Second, "watcher"},
		{3 * time.Second, "generator"},
		{2 * time.Second, "watcher"},
	} {
		r.Trip(trip.behind, trip.source)
	}
	if d, _ := failingDetail(g, health.ReasonClockRollback); d != "generator: clock 3s behind the last issued ID" {
		t.Fatalf("detail = %q, want the largest rollback (3s from the generator)", d)
	}
	if n := g.Transitions()[health.ReasonClockRollback]; n != 1 {
		t.Fatalf("transitions to clock_rollback = %d, want 1 for three trips", n)
	}
}

func TestRollbackRunClearsAndStops(t *testing.T) {
	g := newGuard(t)
	b := &fakeBehinder{behind: time.Second}
	r := NewRollback(g, b, time.Millisecond)
	stop := runInBackground(t, r.Run)
	r.Trip(time.Second, "generator")
	calls := b.callCount()
	waitFor(t, "Run to poll Behind a few times", func() bool { return b.callCount() >= calls+3 })
	if !r.tripped() || g.Ready() {
		t.Fatalf("cleared while Behind() > 0: tripped=%v ready=%v", r.tripped(), g.Ready())
	}
	b.set(0)
	waitFor(t, "Run to clear the check", func() bool { return !r.tripped() && g.Ready() })
	stop()
}

// TestRollbackConcurrentTrips hammers Trip against Run under -race; once the
// last Trip is in and the clock has caught up, the check must clear.
func TestRollbackConcurrentTrips(t *testing.T) {
	g := newGuard(t)
	b := &fakeBehinder{}
	r := NewRollback(g, b, time.Microsecond)
	stop := runInBackground(t, r.Run)
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 500; j++ {
				r.Trip(time.Duration(j)*time.Millisecond, "stress")
			}
		}()
	}
	wg.Wait()
	waitFor(t, "the check to clear after the last trip", func() bool { return !r.tripped() && g.Ready() })
	stop()
}
