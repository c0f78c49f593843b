package clockguard

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// roundLog runs rounds.run with a round that records when it ran and ends
// with the verdict keeping the node out or not, as the test sets.
type roundLog struct {
	r   *rounds
	mu  sync.Mutex
	at  []time.Time
	out bool
}

func (l *roundLog) round() {
	l.mu.Lock()
	l.at = append(l.at, time.Now())
	out := l.out
	l.mu.Unlock()
	l.r.ended(out)
}

func (l *roundLog) setOut(out bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.out = out
}

// gaps returns the time between consecutive rounds.
func (l *roundLog) gaps() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var g []time.Duration
	for i := 1; i < len(l.at); i++ {
		g = append(g, l.at[i].Sub(l.at[i-1]))
	}
	return g
}

// inBubble runs rounds.run in a synctest bubble (virtual time: every wait
// below is exact and instant) with the given interval; script drives it,
// and the run is stopped when script returns.
func inBubble(t *testing.T, interval, retryMax time.Duration, out bool, script func(t *testing.T, l *roundLog)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		l := &roundLog{r: newRounds(retryMax), out: out}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			l.r.run(ctx, interval, l.round)
		}()
		synctest.Wait() // the first round
		script(t, l)
		cancel()
		<-done
	})
}

const ms = time.Millisecond

// TestRoundsRecheckAVerdictThatKeepsTheNodeOut: whatever kept the node out
// (a fresh verdict against it as much as a stale one), the next round comes
// after retryFirst, then twice as late each time up to RetryMax, never
// later than the interval; a verdict that lets the node in waits the
// interval, and resets the backoff.
func TestRoundsRecheckAVerdictThatKeepsTheNodeOut(t *testing.T) {
	for _, tc := range []struct {
		name     string
		interval time.Duration
		retryMax time.Duration // default RetryMax
		script   func(l *roundLog)
		want     []time.Duration
	}{
		{
			name: "out: 250ms doubling to RetryMax", interval: time.Hour,
			script: func(l *roundLog) { time.Sleep(20 * time.Second) },
			want:   []time.Duration{250 * ms, 500 * ms, time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second},
		},
		{
			name: "NTP: 250ms doubling to NTPRetryMax (below public servers' rate limits)", interval: time.Hour, retryMax: ntpRetryMax,
			script: func(l *roundLog) { time.Sleep(40 * time.Second) },
			want:   []time.Duration{250 * ms, 500 * ms, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second, 8 * time.Second, 8 * time.Second},
		},
		{
			name: "out: never later than the interval", interval: 700 * ms,
			script: func(l *roundLog) { time.Sleep(3 * time.Second) },
			want:   []time.Duration{250 * ms, 500 * ms, 700 * ms, 700 * ms, 700 * ms},
		},
		{
			name: "back in: the interval, then out again: the backoff starts afresh", interval: 10 * time.Second,
			script: func(l *roundLog) {
				time.Sleep(800 * ms) // rounds at 0, 250ms, 750ms
				l.setOut(false)      // the round at 1.75s lets the node in
				time.Sleep(2 * time.Second)
				l.setOut(true) // the round at 11.75s takes it out
				time.Sleep(10*time.Second + 500*ms)
			},
			want: []time.Duration{250 * ms, 500 * ms, time.Second, 10 * time.Second, 250 * ms, 500 * ms},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			retryMax := cmp.Or(tc.retryMax, RetryMax)
			inBubble(t, tc.interval, retryMax, true, func(t *testing.T, l *roundLog) {
				tc.script(l)
				if got := l.gaps(); !slices.Equal(got, tc.want) {
					t.Fatalf("gaps between rounds %v, want %v", got, tc.want)
				}
			})
		})
	}
}

// TestRoundsRecheckAfterARoundFromOutside: a round started by a caller (the
// jump guard's checkNow) that leaves the node out brings Run's next round
// forward from the interval; one that lets it in moves Run's next round to
// an interval after it, even a re-check planned while the node was out (a
// passing round never takes the node out sooner than the regular rounds).
func TestRoundsRecheckAfterARoundFromOutside(t *testing.T) {
	const interval, callerAt = 20 * time.Second, 10 * time.Second
	for _, tc := range []struct {
		name      string
		startOut  bool // Run's rounds before the caller's
		callerOut bool
		want      time.Duration // when Run's first round after the caller's comes, after the start
	}{
		{"in, the caller's round out: re-checked after RetryFirst", false, true, callerAt + retryFirst},
		{"in, the caller's round in: an interval after it", false, false, callerAt + interval},
		{"out (re-check due at 15.75s), the caller's round in: the re-check is dropped", true, false, callerAt + interval},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inBubble(t, interval, RetryMax, tc.startOut, func(t *testing.T, l *roundLog) {
				start := time.Now()
				time.Sleep(callerAt)
				l.setOut(tc.callerOut)  // Run's rounds from now on end as the caller's did
				l.r.ended(tc.callerOut) // the caller's round
				time.Sleep(interval + time.Second)
				l.mu.Lock()
				defer l.mu.Unlock()
				for _, at := range l.at {
					if d := at.Sub(start); d > callerAt {
						if d != tc.want {
							t.Fatalf("Run's first round after the caller's came at %v, want %v", d, tc.want)
						}
						return
					}
				}
				t.Fatalf("no round of Run's after the caller's (rounds at %v)", l.at)
			})
		})
	}
}

// TestRoundsRecheckWhileHeld: while the hold reports true (the jump guard
// holding a jump only a new measurement can confirm), rounds whose verdict
// lets the node in are re-checked as if it kept it out; once it reports
// false, the interval is back (after the re-check already planned).
func TestRoundsRecheckWhileHeld(t *testing.T) {
	inBubble(t, time.Hour, RetryMax, false, func(t *testing.T, l *roundLog) {
		var held atomic.Bool
		l.r.recheckWhile(held.Load)
		held.Store(true)
		l.r.ended(false) // the jump guard's round at once
		time.Sleep(2 * time.Second)
		held.Store(false)
		time.Sleep(10 * time.Second)
		// Re-checks at 250ms, 750ms and 1.75s while held; the one planned
		// then, at 3.75s, finds the hold gone and plans the hour.
		want := []time.Duration{retryFirst, 2 * retryFirst, 4 * retryFirst, 8 * retryFirst}
		if got := l.gaps(); !slices.Equal(got, want) {
			t.Fatalf("gaps between Run's rounds %v, want %v (re-checks while held, then the hour)", got, want)
		}
	})
}
