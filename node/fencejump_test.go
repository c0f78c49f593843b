package node

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/cachefile"
	"codeberg.org/snowflaked/snowflaked/clock/clocktest"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// A forward jump of the clock by twice --fence-ahead puts "now" past the
// persisted fence while the node stays in service. The first refused /id
// (503 fence_reached) pokes the fence keeper, which persists a new fence at
// once instead of at its next tick: the next requests succeed within a
// bounded number of attempts and time, and the fence on disk covers every
// issued ID. The keeper's own ticker cannot be what helps: its first tick
// (fence-ahead/3 ≥ 10s after the start) comes after maxWait, and the fake
// clock does not move after the jump.
func TestRunForwardJumpPastFenceRecoversAtOnce(t *testing.T) {
	// Bounded in count and time; paced, so that a slow fence write (an
	// fsync can take tens of ms) does not use up the attempts.
	const maxAttempts, maxWait, pace = 1000, 5 * time.Second, 2 * time.Millisecond
	tests := []struct {
		name  string
		ahead time.Duration
		batch bool // /ids?count=… instead of /id
	}{
		{"fence-ahead 30s, /id", 30 * time.Second, false},
		{"fence-ahead 1h, /id", time.Hour, false},
		{"fence-ahead 30s, /ids", 30 * time.Second, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktest.NewFake(time.Now())
			cfg := testConfig(t, 7)
			cfg.FenceAhead = tc.ahead
			ln := loopbackListener(t)
			addr := ln.Addr().String()
			stop := startRunOn(t, cfg, ln, WithClock(clk))
			waitHTTP(t, addr, "/readyz", func(code int, _ string) bool { return code == http.StatusOK })

			var issued []int64
			fetch := func() (int, string) {
				path := "/id"
				if tc.batch {
					path = "/ids?count=50"
				}
				code, body := httpGet(t, addr, path)
				if code == http.StatusOK {
					for _, f := range strings.Fields(body) {
						id, err := strconv.ParseInt(f, 10, 64)
						if err != nil {
							t.Fatalf("ID %q: %v", f, err)
						}
						issued = append(issued, id)
					}
				}
				return code, body
			}
			if code, body := fetch(); code != http.StatusOK {
				t.Fatalf("before the jump: %d %s", code, body)
			}
			before := waitCache(t, cfg.CacheFile, func(e cachefile.Entry) bool { return e.Fence > 0 }).Fence

			hitsBefore := scrapeHTTP(t, addr)[series("snowflaked_generator_refusals_total", "cause", "fence")]
			clk.StepWall(2 * tc.ahead)
			jumpedTo := clk.WallNanos() / int64(time.Millisecond)

			// Bounded: at most maxAttempts requests within maxWait.
			refused, ok := 0, false
			deadline := time.Now().Add(maxWait)
			for attempt := 0; attempt < maxAttempts && time.Now().Before(deadline); attempt++ {
				code, body := fetch()
				if code == http.StatusOK {
					ok = true
					break
				}
				if code != http.StatusServiceUnavailable || !strings.Contains(body, `"code":"fence_reached"`) {
					t.Fatalf("after the jump: %d %s, want 200 or 503 fence_reached", code, body)
				}
				refused++
				time.Sleep(pace)
			}
			if !ok {
				t.Fatalf("no ID within %d attempts / %s after a forward jump of %s (%d refused)", maxAttempts, maxWait, 2*tc.ahead, refused)
			}
			t.Logf("forward jump of %s: %d request(s) refused with fence_reached before the first ID", 2*tc.ahead, refused)
			hits := scrapeHTTP(t, addr)[series("snowflaked_generator_refusals_total", "cause", "fence")] - hitsBefore
			if hits != float64(refused) {
				t.Errorf("snowflaked_generator_refusals_total{cause=\"fence\"} grew by %v, want %d", hits, refused)
			}
			for range 5 {
				if code, body := fetch(); code != http.StatusOK {
					t.Fatalf("after recovery: %d %s", code, body)
				}
			}

			// The fence on disk was never lowered, covers the jump, and is at
			// or after every issued ID's timestamp.
			e, err := cachefile.Load(cfg.CacheFile)
			if err != nil {
				t.Fatal(err)
			}
			if e.Fence < before || e.Fence < jumpedTo {
				t.Errorf("fence on disk %d: below the fence before the jump %d or the clock after it %d", e.Fence, before, jumpedTo)
			}
			l := snowflake.DefaultLayout()
			for _, id := range issued {
				p, err := l.Decode(id)
				if err != nil {
					t.Fatal(err)
				}
				if ms := p.Time.UnixMilli(); ms > e.Fence {
					t.Fatalf("ID %d has timestamp %d beyond the fence on disk %d", id, ms, e.Fence)
				}
			}
			if err := stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}
		})
	}
}
