package clock

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// everyRun runs Every in a goroutine whose first call of f waits at a gate
// (the test then makes signals pending, or ends ctx, while f is busy) and
// counts the calls.
type everyRun struct {
	calls  int
	gate   chan struct{}
	wake   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

func startEvery(t *testing.T, ctx context.Context, d time.Duration) *everyRun {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	r := &everyRun{gate: make(chan struct{}), wake: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	t.Cleanup(func() { cancel(); <-r.done })
	go func() {
		defer close(r.done)
		Every(ctx, d, r.wake, func() {
			r.calls++
			if r.calls == 1 {
				<-r.gate
			}
		})
	}()
	return r
}

func TestEvery(t *testing.T) {
	const d = time.Second
	tests := []struct {
		name     string
		schedule bool
		// while the first call waits at the gate (it started on a
		// wake-up); its sleeps arm under ctx (under a schedule, a tick
		// and the test's wake-up are never at one instant)
		during    func(ctx context.Context, r *everyRun)
		wantCalls int
	}{
		{"a tick and a wake-up pending together make one call", false, func(ctx context.Context, r *everyRun) {
			Sleep(ctx, d)
			r.wake <- struct{}{}
		}, 2},
		{"the same under a schedule", true, func(ctx context.Context, r *everyRun) {
			Sleep(ctx, d)
			r.wake <- struct{}{}
		}, 2},
		{"an end that comes with a tick wins", false, func(ctx context.Context, r *everyRun) {
			Sleep(ctx, d)
			r.cancel()
		}, 1},
		{"an end that comes with a wake-up wins", false, func(_ context.Context, r *everyRun) {
			r.wake <- struct{}{}
			r.cancel()
		}, 1},
		{"nothing pending: the next call waits for its tick", false, func(context.Context, *everyRun) {}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// select's pick among ready cases is random: a few rounds each
			for round := range 20 {
				synctest.Test(t, func(t *testing.T) {
					ctx := t.Context()
					if tc.schedule {
						ctx = WithSchedule(ctx, NewApart())
					}
					r := startEvery(t, ctx, d)
					r.wake <- struct{}{} // the first call, held at the gate
					synctest.Wait()
					tc.during(ctx, r)
					close(r.gate)
					synctest.Wait()
					if r.calls != tc.wantCalls {
						t.Fatalf("round %d: %d calls, want %d", round, r.calls, tc.wantCalls)
					}
				})
			}
		})
	}
}

func TestEveryTicks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const d = time.Second
		r := startEvery(t, t.Context(), d)
		close(r.gate)
		time.Sleep(3*d + d/2)
		synctest.Wait()
		if r.calls != 3 {
			t.Fatalf("%d calls in 3.5 periods with no wake-up, want 3", r.calls)
		}
		r.cancel()
		<-r.done
		time.Sleep(2 * d)
		if r.calls != 3 {
			t.Fatalf("%d calls after the end, want 3", r.calls)
		}
	})
}
