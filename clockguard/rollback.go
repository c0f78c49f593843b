package clockguard

import (
	"context"
	"fmt"
	"sync/atomic"
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
type Rollback struct {
	check   *Check
	gen     Behinder
	tripped atomic.Bool
	wake    chan struct{}
	poll    time.Duration
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
// cheap and non-blocking, so it can be called from a request handler.
func (r *Rollback) Trip(behind time.Duration, source string) {
	if r.tripped.Swap(true) {
		return
	}
	r.check.Fail(fmt.Sprintf("%s: clock %s behind the last issued ID", source, behind))
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Tripped reports whether the check is failing.
func (r *Rollback) Tripped() bool { return r.tripped.Load() }

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
		if r.tripped.Load() && r.gen.Behind() == 0 {
			r.tripped.Store(false)
			r.check.Pass()
		}
	}
}
