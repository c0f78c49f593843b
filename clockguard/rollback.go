package clockguard

import (
	"context"
	"fmt"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/health"
)

// Behinder tells how far the clock is behind the last issued ID;
// *snowflake.Generator satisfies it.
type Behinder interface {
	Behind() time.Duration
}

// Rollback is the clock_rollback check: it fails when a rollback beyond
// tolerance is reported (by the generator or the watcher) and passes again
// once the clock is past the last issued ID. It is a health.Fault whose
// condition clears when Behind reaches 0 (so a Trip that races with a clear
// is never lost, by the Fault's generation counter), and whose detail shows
// the largest rollback reported since the check last failed.
type Rollback struct {
	f     *health.Fault
	worst time.Duration // largest rollback reported since the check last failed; under the fault's lock
}

// NewRollback registers the clock_rollback check (passing at first) and
// returns it. poll is how often Run re-checks a tripped clock (0 means 10ms).
func NewRollback(g *health.Guard, gen Behinder, poll time.Duration) *Rollback {
	if poll <= 0 {
		poll = 10 * time.Millisecond
	}
	r := &Rollback{f: health.NewFault(g, health.ReasonClockRollback, func() bool { return gen.Behind() <= 0 }, poll)}
	r.f.OnClear(func() { r.worst = 0 })
	return r
}

// Trip takes the node out of service for a rollback of size behind. It is
// cheap and never waits for Run, so it can be called from a request handler
// or the watcher. It takes the guard's lock, so it must not be called from an
// OnTransition hook. While tripped, the detail shows the largest rollback
// reported.
func (r *Rollback) Trip(behind time.Duration, source string) {
	r.f.TripWith(func(first bool) (string, bool) {
		if !first && behind <= r.worst {
			return "", false
		}
		r.worst = behind
		return fmt.Sprintf("%s: clock %s behind the last issued ID", source, behind), true
	})
}

// tripped reports whether the check is failing.
func (r *Rollback) tripped() bool { return r.f.Tripped() }

// Run clears a tripped check once the clock is past the last issued ID,
// until ctx ends.
func (r *Rollback) Run(ctx context.Context) { r.f.Run(ctx) }
