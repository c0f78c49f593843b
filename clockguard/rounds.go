package clockguard

import (
	"context"
	"sync/atomic"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
)

// The pace of the re-checks of a verdict that keeps the node out, whatever
// the round that left it found (this node's clock off, peers whose clocks
// were off, no answer at all): the first after retryFirst, each next one
// twice as late, never later than RetryMax (ntpRetryMax for NTP) nor than
// the regular interval. The worst wait for a node whose cause has gone is
// therefore that maximum plus one round.
const (
	retryFirst = 250 * time.Millisecond
	RetryMax   = 4 * time.Second
	// ntpRetryMax is RetryMax for the NTP check: public NTP servers
	// rate-limit clients that ask more often than every 8s on average (the
	// pool's "discard average 3"), answering with a kiss of death that
	// counts as no answer; re-checks must stay below that rate.
	ntpRetryMax = 8 * time.Second
)

// rounds schedules the rounds of the NTP and peer checks. A round, Run's or
// one a caller started with checkNow (the jump guard's re-ask after a clock
// step), reports with ended whether the check's verdict after it keeps the
// node out. Such a verdict is re-checked soon, with backoff, until a round
// lets the node in: a fresh verdict ages too. Without this a node restarted
// while two of its three peers' clocks were off was rightly judged the
// outlier, and once the peers were set right nothing asked again until the
// next regular round (an hour in the chaos runs: overlapping_faults,
// CHAOS_SEED=1795447615084551578). A verdict that lets the node in is never
// re-checked sooner than the interval: a passing round must not take a node
// out sooner than its regular rounds would.
type rounds struct {
	retryMax time.Duration
	// jitter, when set, varies each regular interval (never a re-check's
	// wait): the peer check's ±10%, so that nodes started at once do not
	// ask in lockstep.
	jitter func(time.Duration) time.Duration
	out    atomic.Bool
	hold   atomic.Pointer[func() bool] // also re-check while it reports true
	wake   chan struct{}               // capacity 1: a round ended
}

// newRounds returns a schedule whose re-checks back off up to retryMax.
func newRounds(retryMax time.Duration) *rounds {
	return &rounds{retryMax: retryMax, wake: make(chan struct{}, 1)}
}

// recheckWhile makes run re-check as for a verdict against the node while
// f reports true (nil: never).
func (r *rounds) recheckWhile(f func() bool) {
	if f == nil {
		r.hold.Store(nil)
		return
	}
	r.hold.Store(&f)
}

// keepsOut reports whether the next round is a re-check: the last verdict
// keeps the node out, or the hold asks for one.
func (r *rounds) keepsOut() bool {
	if r.out.Load() {
		return true
	}
	f := r.hold.Load()
	return f != nil && (*f)()
}

// ended records the end of a round: out says the check's verdict after it
// keeps the node out.
func (r *rounds) ended(out bool) {
	r.out.Store(out)
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// regular returns the wait before a regular round: interval, varied by
// the jitter when there is one.
func (r *rounds) regular(interval time.Duration) time.Duration {
	if r.jitter == nil {
		return interval
	}
	return r.jitter(interval)
}

// run calls round at once and then every interval (varied by the jitter)
// until ctx ends, sooner
// (retryFirst, doubling up to retryMax) while the last round, whoever
// started it, left a verdict that keeps the node out.
func (r *rounds) run(ctx context.Context, interval time.Duration, round func()) {
	retry := retryFirst
	timer := clock.NewTimer(ctx, interval)
	defer timer.Stop()
	var due time.Time
	schedule := func(d time.Duration) {
		timer.Reset(d)
		due = time.Now().Add(d)
	}
	// next schedules the round after one whose verdict keeps the node out
	// or not.
	next := func(out bool) {
		if !out {
			retry = retryFirst
			schedule(r.regular(interval))
			return
		}
		schedule(min(retry, interval))
		retry = min(2*retry, r.retryMax)
	}
	round()
	next(r.keepsOut())
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
			if ctx.Err() != nil { // an end that came with it wins (select picks at random)
				return
			}
			round()
			next(r.keepsOut())
		case <-r.wake:
			// A round ended, perhaps started by a caller: re-check sooner
			// than planned if it left the node out. (The wake of Run's own
			// round finds the re-check already planned.)
			if !r.keepsOut() {
				// A passing verdict: the next round is a regular one, an
				// interval from this one, never a re-check planned while
				// the node was out.
				next(false)
				continue
			}
			if time.Until(due) > min(retry, interval) {
				next(true)
			}
		}
	}
}
