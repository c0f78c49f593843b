package clockguard

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Behinder tells how far the clock is behind the last issued ID;
// *snowflake.Generator satisfies it.
type Behinder interface {
	Behind() time.Duration
}

// Rollback is the clock_rollback check: it fails when a rollback beyond
// tolerance is reported (by the generator or the watcher) and passes again
// once the clock is past the last issued ID.
//
// A generation counter, bumped by every Trip, makes clearing safe: Run clears
// the check only if no Trip happened between its reading of the generation
// and its verdict, so a Trip that races with a clear is never lost.
type Rollback struct {
	check *Check
	gen   Behinder
	wake  chan struct{}
	poll  time.Duration

	mu         sync.Mutex
	tripped    bool
	generation uint64        // bumped by every Trip
	worst      time.Duration // largest rollback reported since the check last failed
}

// NewRollback registers the clock_rollback check (passing at first) and
// returns it. poll is how often Run re-checks a tripped clock (0 means 10ms).
func NewRollback(g *Guard, gen Behinder, poll time.Duration) *Rollback {
	if poll <= 0 {
		poll = 10 * time.Millisecond
	}
	r := &Rollback{check: g.Check(ReasonClockRollback), gen: gen, wake: make(chan struct{}, 1), poll: poll}
	r.check.Pass()
	return r
}

// Trip takes the node out of service for a rollback of size behind. It is
// cheap and never waits for Run, so it can be called from a request handler
// or the watcher. It takes the guard's lock, so it must not be called from an
// OnTransition hook. While tripped, the detail shows the largest rollback
// reported.
func (r *Rollback) Trip(behind time.Duration, source string) {
	r.mu.Lock()
	r.generation++
	if !r.tripped || behind > r.worst {
		r.tripped = true
		r.worst = behind
		r.check.Fail(fmt.Sprintf("%s: clock %s behind the last issued ID", source, behind))
	}
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Tripped reports whether the check is failing.
func (r *Rollback) Tripped() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tripped
}

// Run clears a tripped check once the clock is past the last issued ID,
// until ctx ends.
func (r *Rollback) Run(ctx context.Context) {
	t := time.NewTicker(r.poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-t.C:
		}
		r.tryClear()
	}
}

// tryClear passes the check if it is tripped, the clock is no longer behind
// and no Trip happened meanwhile. Behind is called without the lock, so a
// Behinder may itself call Trip.
func (r *Rollback) tryClear() {
	r.mu.Lock()
	tripped, seen := r.tripped, r.generation
	r.mu.Unlock()
	if !tripped || r.gen.Behind() > 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.generation != seen {
		return // a Trip landed after we looked: judge it on the next round
	}
	r.tripped = false
	r.worst = 0
	r.check.Pass()
}
