package clockguard

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/internal/testsupport"

	"codeberg.org/snowflaked/snowflaked/internal/health"
)

// waitTimeout bounds every poll of a condition in these tests.
const waitTimeout = 10 * time.Second

// leakTimeout bounds the wait for goroutines to exit after a stop. fasthttp's
// client keeps an idle-host cleaner for up to a second after its last request.
const leakTimeout = 10 * time.Second

// newGuard returns a guard that logs to the test log.
func newGuard(t *testing.T) *health.Guard {
	t.Helper()
	return health.New(testLogger(t), nil)
}

// testLogger writes zerolog lines to t.Log.
func testLogger(t *testing.T) zerolog.Logger {
	t.Helper()
	return zerolog.New(zerolog.NewTestWriter(t)).With().Timestamp().Logger()
}

// waitFor polls cond every millisecond until it holds or waitTimeout passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testsupport.Poll(t, waitTimeout, time.Millisecond, what, cond)
}

// runInBackground runs fn(ctx) on a goroutine and returns a stop function
// that cancels ctx, waits (bounded) for fn to return and then checks that
// the goroutine count is back to what it was before the start. stop is also
// registered with t.Cleanup; calling it twice is harmless.
func runInBackground(t *testing.T, fn func(ctx context.Context)) (stop func()) {
	t.Helper()
	base := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(ctx)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(waitTimeout):
				t.Errorf("Run did not return within %v of its context ending", waitTimeout)
				return
			}
			requireGoroutinesBackTo(t, base)
		})
	}
	t.Cleanup(stop)
	return stop
}

// requireGoroutinesBackTo polls until at most base goroutines run, and
// fails with every goroutine's stack if that does not happen in leakTimeout.
func requireGoroutinesBackTo(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(leakTimeout)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Errorf("goroutine leak: %d running, %d before the start\n%s", runtime.NumGoroutine(), base, buf)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// failingDetail returns the detail of the failing check reason, and whether
// it fails.
func failingDetail(g *health.Guard, reason health.Reason) (string, bool) {
	d, ok := g.Failing()[reason]
	return d, ok
}
