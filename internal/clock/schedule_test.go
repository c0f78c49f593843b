package clock_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
)

// fireOrder arms n timers for d at one instant, in order, through arm, and
// returns the order they fired in.
func fireOrder(ctx context.Context, n int, d time.Duration) []int {
	fired := make(chan int, n)
	timers := make([]*clock.Timer, n)
	for i := range n {
		timers[i] = clock.AfterFunc(ctx, d, func() { fired <- i })
	}
	synctest.Wait()
	time.Sleep(d + time.Millisecond)
	synctest.Wait()
	close(fired)
	var order []int
	for i := range fired {
		order = append(order, i)
	}
	return order
}

// TestApartFiresOneInstantInArmingOrder is why the simulations run under
// an Apart: synctest fires the timers of one virtual instant in a random
// order, and under an Apart they fire in the order they were armed, each
// at its own nanosecond.
func TestApartFiresOneInstantInArmingOrder(t *testing.T) {
	const n, runs = 8, 20
	want := []int{0, 1, 2, 3, 4, 5, 6, 7}
	orders := map[string]bool{}
	for range runs {
		synctest.Test(t, func(t *testing.T) {
			orders[fmtOrder(fireOrder(context.Background(), n, time.Second))] = true
		})
	}
	if len(orders) < 2 {
		t.Errorf("without a Schedule, %d runs fired %d timers of one instant in one order (%v): the runtime no longer orders them at random", runs, n, orders)
	}
	for range runs {
		synctest.Test(t, func(t *testing.T) {
			ctx := clock.WithSchedule(context.Background(), clock.NewApart())
			if got := fireOrder(ctx, n, time.Second); !slices.Equal(got, want) {
				t.Fatalf("under an Apart the timers fired in order %v, want the arming order %v", got, want)
			}
		})
	}
}

func fmtOrder(o []int) string {
	b := make([]byte, len(o))
	for i, v := range o {
		b[i] = byte('0' + v)
	}
	return string(b)
}

func TestApartArm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := clock.NewApart()
		now := time.Now()
		at := func(d time.Duration) time.Duration { return a.Arm(d).Sub(now) }
		steps := []struct {
			name string
			do   func() time.Duration
			want time.Duration
		}{
			{"a first timer fires when asked", func() time.Duration { return at(time.Second) }, time.Second},
			{"a second one due then waits a nanosecond", func() time.Duration { return at(time.Second) }, time.Second + 1},
			{"a third one waits two", func() time.Duration { return at(time.Second) }, time.Second + 2},
			{"one due at a taken nanosecond takes the next free one", func() time.Duration { return at(time.Second + 1) }, time.Second + 3},
			{"another instant is free", func() time.Duration { return at(2 * time.Second) }, 2 * time.Second},
			{"a disarmed instant is free again", func() time.Duration {
				a.Disarm(now.Add(time.Second + 1))
				return at(time.Second)
			}, time.Second + 1},
		}
		for _, s := range steps {
			if got := s.do(); got != s.want {
				t.Errorf("%s: fires %v from now, want %v", s.name, got, s.want)
			}
		}
	})
}

// TestStoppedTimersFreeTheirInstant: a timer stopped (or reset, or a
// context cancelled) before it fires leaves no mark, so what a run armed
// and stopped does not move the timers armed after it.
func TestStoppedTimersFreeTheirInstant(t *testing.T) {
	cases := []struct {
		name   string
		stop   func(ctx context.Context)
		freed  bool
		reason string
	}{
		{"Timer.Stop", func(ctx context.Context) { clock.NewTimer(ctx, time.Second).Stop() }, true, ""},
		{"Timer.Reset", func(ctx context.Context) { clock.NewTimer(ctx, time.Second).Reset(time.Hour) }, true, ""},
		{"AfterFunc's Stop", func(ctx context.Context) { clock.AfterFunc(ctx, time.Second, func() {}).Stop() }, true, ""},
		{"WithTimeout's cancel", func(ctx context.Context) { _, cancel := clock.WithTimeout(ctx, time.Second); cancel() }, true, ""},
		{"WithDeadline's cancel", func(ctx context.Context) {
			_, cancel := clock.WithDeadline(ctx, time.Now().Add(time.Second))
			cancel()
		}, true, ""},
		{"Ticker.Stop", func(ctx context.Context) { clock.NewTicker(ctx, time.Second).Stop() }, true, ""},
		{"a timer left armed", func(ctx context.Context) { clock.NewTimer(ctx, time.Second) }, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := clock.NewApart()
				ctx := clock.WithSchedule(context.Background(), a)
				now := time.Now()
				tc.stop(ctx)
				got := a.Arm(time.Second).Sub(now)
				want := time.Second
				if !tc.freed {
					want++
				}
				if got != want {
					t.Errorf("the next timer due in 1s fires in %v, want %v", got, want)
				}
			})
		})
	}
}

func TestTimerUnderApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := clock.WithSchedule(context.Background(), clock.NewApart())
		start := time.Now()
		a, b := clock.NewTimer(ctx, time.Second), clock.NewTimer(ctx, time.Second)
		at := <-a.C
		bt := <-b.C
		if at.Sub(start) != time.Second || bt.Sub(start) != time.Second+1 {
			t.Errorf("two timers of one instant fired after %v and %v, want 1s and 1s+1ns", at.Sub(start), bt.Sub(start))
		}
		if a.Stop() {
			t.Error("Stop of a timer that fired reported it stopped it")
		}
		b.Reset(time.Second)
		if ct := <-b.C; ct.Sub(start) != 2*time.Second+1 {
			t.Errorf("a reset timer fired %v after the start, want 2s+1ns", ct.Sub(start))
		}
	})
}

func TestSleep(t *testing.T) {
	for _, sched := range []clock.Schedule{nil, clock.NewApart()} {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(clock.WithSchedule(context.Background(), sched))
			start := time.Now()
			if !clock.Sleep(ctx, time.Second) || time.Since(start) != time.Second {
				t.Errorf("Sleep(1s) (schedule %T) returned after %v", sched, time.Since(start))
			}
			go func() { time.Sleep(time.Second); cancel() }()
			start = time.Now()
			if clock.Sleep(ctx, time.Hour) || time.Since(start) != time.Second {
				t.Errorf("Sleep(1h) cancelled after 1s (schedule %T) returned true or after %v", sched, time.Since(start))
			}
			if clock.Sleep(ctx, time.Second) {
				t.Errorf("Sleep with an ended context (schedule %T) reported it slept", sched)
			}
		})
	}
}

func TestWithTimeout(t *testing.T) {
	for _, sched := range []clock.Schedule{nil, clock.NewApart()} {
		synctest.Test(t, func(t *testing.T) {
			base := clock.WithSchedule(context.Background(), sched)
			start := time.Now()
			ctx, cancel := clock.WithTimeout(base, time.Second)
			defer cancel()
			if dl, ok := ctx.Deadline(); !ok || dl.Sub(start) != time.Second {
				t.Errorf("WithTimeout(1s) (schedule %T): deadline %v after the start, want 1s", sched, dl.Sub(start))
			}
			<-ctx.Done()
			if time.Since(start) != time.Second || ctx.Err() != context.DeadlineExceeded {
				t.Errorf("WithTimeout(1s) (schedule %T) ended after %v with %v", sched, time.Since(start), ctx.Err())
			}
			// A parent's earlier deadline stays the deadline.
			parent, pcancel := clock.WithTimeout(base, time.Second)
			defer pcancel()
			child, ccancel := clock.WithDeadline(parent, time.Now().Add(time.Hour))
			defer ccancel()
			pdl, _ := parent.Deadline()
			if dl, _ := child.Deadline(); !dl.Equal(pdl) {
				t.Errorf("a child's later deadline (schedule %T) replaced the parent's: %v, want %v", sched, dl, pdl)
			}
		})
	}
}

func TestTicker(t *testing.T) {
	for _, sched := range []clock.Schedule{nil, clock.NewApart()} {
		synctest.Test(t, func(t *testing.T) {
			ctx := clock.WithSchedule(context.Background(), sched)
			start := time.Now()
			tk := clock.NewTicker(ctx, 100*time.Millisecond)
			for i := 1; i <= 3; i++ {
				at := <-tk.C
				if got := at.Sub(start); got != time.Duration(i)*100*time.Millisecond {
					t.Errorf("tick %d (schedule %T) came %v after the start", i, sched, got)
				}
			}
			// A slow reader misses ticks; one waits, and is not read after Stop.
			time.Sleep(time.Second)
			tk.Stop()
			time.Sleep(time.Second)
			select {
			case <-tk.C:
				t.Errorf("a tick (schedule %T) came after Stop", sched)
			default:
			}
		})
	}
	defer func() {
		if recover() == nil {
			t.Error("NewTicker(0) under a schedule did not panic, as time.NewTicker does")
		}
	}()
	clock.NewTicker(clock.WithSchedule(context.Background(), clock.NewApart()), 0)
}
