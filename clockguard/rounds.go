package clockguard

import (
	"context"
	"sync/atomic"
	"time"
)

// The pace of the retries of a check whose last round gave no verdict
// (the peer list or every NTP server unreachable) while the verdict before
// it keeps the node out: the first after staleRetryFirst, each next one
// twice as late, never later than staleRetryMax nor than the interval.
const (
	staleRetryFirst = 250 * time.Millisecond
	staleRetryMax   = 30 * time.Second
)

// rounds schedules the rounds of the NTP and peer checks. A round, Run's or
// one a caller started with CheckNow (the jump guard's re-ask after a clock
// step), reports with ended whether it left a stale verdict against the
// node. Without the retries such a node would stay out until the next
// regular round however soon the source came back: with a peer interval of
// an hour, a re-ask after the clock was set right that found ZooKeeper
// electing a leader kept a node out for that hour (chaos overlapping_faults,
// CHAOS_SEED=1795383420800653940).
type rounds struct {
	stale atomic.Bool
	wake  chan struct{} // capacity 1: a round ended
}

func newRounds() *rounds { return &rounds{wake: make(chan struct{}, 1)} }

// ended records the end of a round: stale says it gave no verdict while
// the one before it keeps the node out.
func (r *rounds) ended(stale bool) {
	r.stale.Store(stale)
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// run calls round at once and then every interval until ctx ends, sooner
// (staleRetryFirst, doubling up to staleRetryMax) while the last round,
// whoever started it, left a stale verdict against the node.
func (r *rounds) run(ctx context.Context, interval time.Duration, round func()) {
	retry := staleRetryFirst
	timer := time.NewTimer(interval)
	defer timer.Stop()
	var due time.Time
	schedule := func(d time.Duration) {
		timer.Reset(d)
		due = time.Now().Add(d)
	}
	// next schedules the round after one that ended stale or not.
	next := func(stale bool) {
		if !stale {
			retry = staleRetryFirst
			schedule(interval)
			return
		}
		schedule(min(retry, interval))
		retry = min(2*retry, staleRetryMax)
	}
	round()
	next(r.stale.Load())
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
			round()
			next(r.stale.Load())
		case <-r.wake:
			// A round ended, perhaps started by a caller: retry sooner
			// than planned if it left a stale verdict. (The wake of Run's
			// own round finds the retry already planned.)
			if !r.stale.Load() {
				retry = staleRetryFirst
				continue
			}
			if time.Until(due) > min(retry, interval) {
				next(true)
			}
		}
	}
}
