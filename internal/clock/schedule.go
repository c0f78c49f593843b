package clock

import (
	"context"
	"sync"
	"time"
)

// A Schedule decides when the timers armed under a context fire. The
// product arms every timer, ticker, sleep and context deadline through
// this package (NewTimer, Sleep, NewTicker, WithTimeout, WithDeadline), so
// a test can set one Schedule on the context a process runs under and
// order all of its timers. Without a Schedule (production) a timer fires
// when it asked.
type Schedule interface {
	// Arm returns the instant a timer armed now for d (> 0) fires: now+d,
	// or a little later.
	Arm(d time.Duration) time.Time
	// Disarm says that the timer Arm gave at was stopped, or has fired.
	Disarm(at time.Time)
}

type scheduleKey struct{}

// WithSchedule returns a copy of ctx under which timers fire as s says
// (ctx itself when s is nil).
func WithSchedule(ctx context.Context, s Schedule) context.Context {
	if s == nil {
		return ctx
	}
	return context.WithValue(ctx, scheduleKey{}, s)
}

func scheduleOf(ctx context.Context) Schedule {
	s, _ := ctx.Value(scheduleKey{}).(Schedule)
	return s
}

// A Timer is a time.Timer armed under a context's Schedule.
type Timer struct {
	// C delivers the time once the timer fires.
	C  <-chan time.Time
	t  *time.Timer
	s  Schedule  // nil: a plain time.Timer
	at time.Time // when it fires (with a Schedule)
	mu sync.Mutex
}

// NewTimer is time.NewTimer armed under ctx's Schedule.
func NewTimer(ctx context.Context, d time.Duration) *Timer {
	t := &Timer{s: scheduleOf(ctx)}
	t.t = time.NewTimer(t.arm(d))
	t.C = t.t.C
	return t
}

// AfterFunc is time.AfterFunc armed under ctx's Schedule.
func AfterFunc(ctx context.Context, d time.Duration, f func()) *Timer {
	t := &Timer{s: scheduleOf(ctx)}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.t = time.AfterFunc(t.arm(d), f)
	return t
}

// arm returns how long the timer waits for d, noting when it fires.
func (t *Timer) arm(d time.Duration) time.Duration {
	if t.s == nil || d <= 0 {
		return d
	}
	t.at = t.s.Arm(d)
	return time.Until(t.at)
}

// disarm frees the instant the timer was armed for: it was stopped, or
// it fired (a past instant is never armed again).
func (t *Timer) disarm() {
	if t.s != nil && !t.at.IsZero() {
		t.s.Disarm(t.at)
		t.at = time.Time{}
	}
}

// Stop is time.Timer's Stop.
func (t *Timer) Stop() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	stopped := t.t.Stop()
	t.disarm()
	return stopped
}

// Reset is time.Timer's Reset, armed under the Timer's Schedule.
func (t *Timer) Reset(d time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	stopped := t.t.Stop()
	t.disarm()
	t.t.Reset(t.arm(d))
	return stopped
}

// Sleep waits d, or until ctx ends; it reports whether it waited d.
func Sleep(ctx context.Context, d time.Duration) bool {
	if ctx.Err() != nil {
		return false
	}
	t := NewTimer(ctx, d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// WithTimeout is context.WithTimeout with the timeout armed under ctx's
// Schedule.
func WithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	s := scheduleOf(ctx)
	if s == nil || d <= 0 {
		return context.WithTimeout(ctx, d)
	}
	at := s.Arm(d)
	c, cancel := context.WithDeadline(ctx, at)
	if dl, _ := c.Deadline(); !dl.Equal(at) {
		s.Disarm(at) // the parent's deadline comes first: no timer
		return c, cancel
	}
	var once sync.Once
	return c, func() {
		cancel()
		once.Do(func() { s.Disarm(at) }) // stopped, or past (never armed again)
	}
}

// WithDeadline is context.WithDeadline with the deadline armed under ctx's
// Schedule.
func WithDeadline(ctx context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	if scheduleOf(ctx) == nil {
		return context.WithDeadline(ctx, deadline)
	}
	return WithTimeout(ctx, time.Until(deadline))
}

// A Ticker sends the time on C every period, like time.Ticker, dropping
// ticks a slow reader misses.
type Ticker struct {
	// C delivers the ticks.
	C <-chan time.Time
	t *time.Ticker

	// Under a Schedule one goroutine re-arms a Timer at each tick.
	c        chan time.Time
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// NewTicker returns a Ticker that ticks every d (d > 0). Without a
// Schedule on ctx it is a time.Ticker; with one, each tick is a Timer armed
// through it when the previous one fired.
func NewTicker(ctx context.Context, d time.Duration) *Ticker {
	if d <= 0 {
		panic("clock.NewTicker: non-positive interval")
	}
	if scheduleOf(ctx) == nil {
		t := time.NewTicker(d)
		return &Ticker{C: t.C, t: t}
	}
	c := make(chan time.Time, 1)
	t := &Ticker{C: c, c: c, stop: make(chan struct{}), done: make(chan struct{})}
	tm := NewTimer(ctx, d)
	go t.run(tm, d, c)
	return t
}

func (t *Ticker) run(tm *Timer, d time.Duration, c chan<- time.Time) {
	defer close(t.done)
	defer tm.Stop()
	for {
		select {
		case <-t.stop:
			return
		case now := <-tm.C:
			select {
			case <-t.stop: // a Stop that came with the tick wins (select picks at random)
				return
			default:
			}
			tm.Reset(d)
			select {
			case c <- now:
			default:
			}
		}
	}
}

// Stop turns the ticker off; no tick is sent after it returns.
func (t *Ticker) Stop() {
	if t.t != nil {
		t.t.Stop()
		return
	}
	t.stopOnce.Do(func() { close(t.stop) })
	<-t.done
	Drain(t.c) // a tick not read yet is not read after Stop, as with time.Ticker
}

// Apart is a Schedule under which no two timers fire at one instant: a
// timer due when another one armed through it and not stopped is due
// waits for the first nanosecond no such timer takes, so timers due
// together fire in the order they were armed. Under testing/synctest,
// whose runtime fires the timers of one virtual instant in a random order,
// it makes a run that starts the same way go the same way: the
// simulations run every process under one. Its zero value is not usable:
// call NewApart.
type Apart struct {
	mu    sync.Mutex
	taken map[int64]struct{} // instants the live timers fire at
	prune int                // forget the past instants at this many
}

// NewApart returns an Apart with no timer armed.
func NewApart() *Apart { return &Apart{taken: map[int64]struct{}{}, prune: apartPrune} }

// apartPrune is how many instants Apart keeps at least before it forgets
// the past ones (the timers that fired and were not stopped).
const apartPrune = 1 << 12

// Arm returns now+d, and as many nanoseconds more as the instants already
// taken from there on.
func (a *Apart) Arm(d time.Duration) time.Time {
	now := time.Now().UnixNano()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.taken) >= a.prune {
		for at := range a.taken {
			if at <= now {
				delete(a.taken, at)
			}
		}
		a.prune = max(apartPrune, 2*len(a.taken))
	}
	at := now + int64(d)
	for {
		if _, ok := a.taken[at]; !ok {
			break
		}
		at++
	}
	a.taken[at] = struct{}{}
	return time.Unix(0, at)
}

// Disarm frees the instant of a timer that was stopped or fired.
func (a *Apart) Disarm(at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.taken, at.UnixNano())
}
