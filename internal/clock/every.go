package clock

import (
	"context"
	"time"
)

// Every calls f every d (d > 0), and at once on a wake-up (wake may be
// nil), until ctx ends. An end that comes with a tick or a wake-up wins: f
// is not called after it. One call answers every signal pending when it
// starts: select takes one ready case at random, and a signal it left
// pending would make a second call in some runs and not in others (a
// signal that comes during a call makes the next one). The ticker is
// armed under ctx's Schedule.
func Every(ctx context.Context, d time.Duration, wake <-chan struct{}, f func()) {
	t := NewTicker(ctx, d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-t.C:
		}
		if ctx.Err() != nil {
			return
		}
		Drain(t.C)
		Drain(wake)
		f()
	}
}
