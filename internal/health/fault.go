package health

import (
	"context"
	"sync"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
)

// Fault is a check for a condition the request path discovers (a generator
// error): Trip takes the node out of service with the fault's reason, and
// Run passes the check again once clear reports the condition gone. It
// counts Trips, so a Trip that races with a clear is never lost.
// clockguard.Rollback (clock_rollback) is built on it.
type Fault struct {
	check *Check
	clear func() bool
	wake  chan struct{}
	poll  time.Duration

	mu         sync.Mutex
	tripped    bool
	generation uint64 // bumped by every Trip: a clear that raced one is dropped
	onClear    func() // called under mu when the check passes again (clockguard.Rollback resets its worst)
}

// NewFault registers a check for reason (passing at first). clear is
// called by Run, without locks held, while the fault is tripped; poll is how
// often (0 means 50ms).
func NewFault(g *Guard, reason Reason, clear func() bool, poll time.Duration) *Fault {
	if poll <= 0 {
		poll = 50 * time.Millisecond
	}
	f := &Fault{check: g.Check(reason), clear: clear, wake: make(chan struct{}, 1), poll: poll}
	f.check.Pass()
	return f
}

// OnClear registers fn to be called, under the fault's lock, each time the
// check passes again; fn must be quick and must not call the fault. Call it
// before Run and before the first Trip.
func (f *Fault) OnClear(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onClear = fn
}

// Trip fails the check with detail. It is cheap and never waits for Run.
func (f *Fault) Trip(detail string) {
	f.TripWith(func(first bool) (string, bool) { return detail, first })
}

// TripWith bumps the generation, marks the fault tripped and, when update
// (called under the lock with whether this is the first Trip since the last
// clear) says so, fails the check with the detail it returns; then it wakes
// Run. Like Trip it is cheap and never waits for Run; update must be quick
// and must not call the fault or the guard.
func (f *Fault) TripWith(update func(first bool) (detail string, fail bool)) {
	f.mu.Lock()
	f.generation++
	first := !f.tripped
	f.tripped = true
	if detail, fail := update(first); fail {
		f.check.Fail(detail)
	}
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// Tripped reports whether the check is failing.
func (f *Fault) Tripped() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tripped
}

// Run clears the fault once clear holds, until ctx ends.
func (f *Fault) Run(ctx context.Context) {
	clock.Every(ctx, f.poll, f.wake, func() { f.TryClear() })
}

// TryClear passes the check if it is tripped, clear holds and no Trip
// happened meanwhile (Run calls it every poll; tests call it directly).
func (f *Fault) TryClear() {
	f.mu.Lock()
	tripped, seen := f.tripped, f.generation
	f.mu.Unlock()
	if !tripped || !f.clear() {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.generation != seen {
		return // a Trip landed after we looked
	}
	f.tripped = false
	if f.onClear != nil {
		f.onClear()
	}
	f.check.Pass()
}

// Faults clears several faults in one loop: one goroutine and one ticker
// for all of them, woken by a Trip of any. A node's generator faults share
// one, so each adds no background loop of its own.
type Faults struct {
	wake chan struct{}
	poll time.Duration
	list []*Fault
}

// NewFaults returns an empty group whose loop polls every poll (0 means
// 50ms).
func NewFaults(poll time.Duration) *Faults {
	if poll <= 0 {
		poll = 50 * time.Millisecond
	}
	return &Faults{wake: make(chan struct{}, 1), poll: poll}
}

// Add registers a fault for reason (passing at first) in the group, as
// NewFault does; its Trip wakes the group's Run. Call it before Run.
func (fs *Faults) Add(g *Guard, reason Reason, clear func() bool) *Fault {
	f := &Fault{check: g.Check(reason), clear: clear, wake: fs.wake, poll: fs.poll}
	f.check.Pass()
	fs.list = append(fs.list, f)
	return f
}

// Run clears each tripped fault once its condition holds, until ctx ends.
func (fs *Faults) Run(ctx context.Context) {
	clock.Every(ctx, fs.poll, fs.wake, func() {
		for _, f := range fs.list {
			f.TryClear()
		}
	})
}
