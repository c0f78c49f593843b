package clockguard

import (
	"context"
	"sync"
	"testing"
	"time"
)

// roundLog runs rounds.run with a round that records when it ran and ends
// stale or not as the test sets.
type roundLog struct {
	r     *rounds
	mu    sync.Mutex
	at    []time.Time
	stale bool
}

func (l *roundLog) round() {
	l.mu.Lock()
	l.at = append(l.at, time.Now())
	stale := l.stale
	l.mu.Unlock()
	l.r.ended(stale)
}

func (l *roundLog) times() []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Time(nil), l.at...)
}

func startRounds(t *testing.T, interval time.Duration, stale bool) *roundLog {
	t.Helper()
	l := &roundLog{r: newRounds(), stale: stale}
	stop := runInBackground(t, func(ctx context.Context) { l.r.run(ctx, interval, l.round) })
	t.Cleanup(stop)
	return l
}

// TestRoundsRetryStaleWithBackoff: while rounds end stale, the next comes
// after 250ms, 500ms, 1s (never sooner: a timer does not fire early), not
// after the hour's interval. (That a fresh round leaves the interval alone
// is TestRoundsRetryAfterAStaleRoundFromOutside's second case.)
func TestRoundsRetryStaleWithBackoff(t *testing.T) {
	l := startRounds(t, time.Hour, true)
	waitFor(t, "4 rounds", func() bool { return len(l.times()) >= 4 })
	at := l.times()
	for i, want := range []time.Duration{staleRetryFirst, 2 * staleRetryFirst, 4 * staleRetryFirst} {
		if gap := at[i+1].Sub(at[i]); gap < want-5*time.Millisecond {
			t.Fatalf("retry %d came %v after the round before, want at least %v (backoff)", i+1, gap, want)
		}
	}
}

// TestRoundsRetryAfterAStaleRoundFromOutside: a round started by a caller
// (the jump guard's CheckNow) that ends stale brings Run's next round
// forward from the interval; one that ends fresh does not.
func TestRoundsRetryAfterAStaleRoundFromOutside(t *testing.T) {
	for _, tc := range []struct {
		name       string
		stale      bool
		wantRounds int
	}{
		{"stale: retried", true, 2},
		{"fresh: the interval stands", false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := startRounds(t, time.Hour, false)
			waitFor(t, "the first round", func() bool { return len(l.times()) == 1 })
			l.r.ended(tc.stale) // the caller's round
			if tc.stale {
				waitFor(t, "a retry", func() bool { return len(l.times()) >= 2 })
			}
			time.Sleep(4 * staleRetryFirst)
			if n := len(l.times()); n != tc.wantRounds {
				t.Fatalf("%d rounds, want %d", n, tc.wantRounds)
			}
		})
	}
}
