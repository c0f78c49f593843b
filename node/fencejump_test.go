package node

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/clockguard"
	"codeberg.org/snowflaked/snowflaked/internal/cachefile"
	"codeberg.org/snowflaked/snowflaked/internal/clock/clocktest"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// Forward clock jumps, standalone and without NTP. A jump
// within the fence headroom (--fence-ahead) changes nothing. A jump beyond
// it is suspect: the node leaves service (clock_jump) and no fence is
// persisted on the jumped time, so after the jump is undone the node is
// back at once and its disk never carried the bad time. If the jump holds
// for clockguard.JumpHold (no NTP or peer could answer), it is accepted: IDs resume on
// the new time, and the fence on disk covers every issued ID.
func TestRunForwardJump(t *testing.T) {
	// Bounded in count and time; paced, so that a slow fence write does not
	// use up the attempts.
	const maxAttempts, maxWait, pace = 1000, 10 * time.Second, 2 * time.Millisecond
	const ahead = 30 * time.Second
	tests := []struct {
		name      string
		jump      time.Duration
		then      func(clk *clocktest.Fake) // after the jump: undo it, or let time pass
		wantHeld  bool                      // out with clock_jump right after the jump
		wantAfter bool                      // IDs after the jump carry the jumped time
	}{
		{name: "within the headroom", jump: ahead / 2, wantAfter: true},
		{name: "beyond the headroom, undone", jump: 2 * ahead, wantHeld: true,
			then: func(clk *clocktest.Fake) { clk.StepWall(-2 * ahead) }},
		{name: "beyond the headroom, held for JumpHold", jump: 2 * ahead, wantHeld: true, wantAfter: true,
			then: func(clk *clocktest.Fake) { clk.Advance(clockguard.JumpHold) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktest.NewFake(time.Now())
			cfg := testConfig(t, 7)
			cfg.FenceAhead = ahead
			ln := loopbackListener(t)
			addr := ln.Addr().String()
			stop := startRunOn(t, cfg, ln, withClock(clk))
			waitHTTP(t, addr, "/readyz", func(code int, _ string) bool { return code == http.StatusOK })

			var issued []int64
			fetch := func() (int, string) {
				code, body := httpGet(t, addr, "/ids?count=50")
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

			clk.StepWall(tc.jump)
			jumpedTo := clk.WallNanos() / int64(time.Millisecond)
			if tc.wantHeld {
				_, body := waitHTTP(t, addr, "/readyz", func(code int, body string) bool {
					return code == http.StatusServiceUnavailable && strings.Contains(body, `"reason":"clock_jump"`)
				})
				if code, _ := fetch(); code != http.StatusServiceUnavailable {
					t.Fatalf("an ID on the suspect time: %d", code)
				}
				if e, err := cachefile.Load(cfg.CacheFile); err != nil || e.Fence >= snowflake.UnixMilli(jumpedTo) {
					t.Fatalf("fence on disk %d (%v) reached the suspect time %d", e.Fence, err, jumpedTo)
				}
				t.Logf("after a jump of %s: %s", tc.jump, body)
			}
			if tc.then != nil {
				tc.then(clk)
			}
			// Bounded: at most maxAttempts requests within maxWait; a few
			// fence_reached refusals are expected while the keeper catches up.
			if ok, refused, last := fetchUntilOK(fetch, maxAttempts, maxWait, pace); !ok {
				t.Fatalf("no ID within %d attempts / %s (%d refused, last %s)", maxAttempts, maxWait, refused, last)
			}
			l := snowflake.DefaultLayout()
			p, err := l.Decode(issued[len(issued)-1])
			if err != nil {
				t.Fatal(err)
			}
			if carries := p.Time.UnixMilli() >= jumpedTo; carries != tc.wantAfter {
				t.Fatalf("the first ID after has time %d, the jumped clock read %d: carries the jump %v, want %v", p.Time.UnixMilli(), jumpedTo, carries, tc.wantAfter)
			}
			// The fence on disk was never lowered and covers every issued ID;
			// after an undone jump it never carried the jumped time.
			e, err := cachefile.Load(cfg.CacheFile)
			if err != nil {
				t.Fatal(err)
			}
			if e.Fence < before {
				t.Errorf("fence on disk %d below the one before the jump %d", e.Fence, before)
			}
			if !tc.wantAfter && e.Fence >= snowflake.UnixMilli(jumpedTo) {
				t.Errorf("fence on disk %d carries the undone jump to %d", e.Fence, jumpedTo)
			}
			for _, id := range issued {
				p, err := l.Decode(id)
				if err != nil {
					t.Fatal(err)
				}
				if ms := p.Time.UnixMilli(); snowflake.UnixMilli(ms) > e.Fence {
					t.Fatalf("ID %d has timestamp %d beyond the fence on disk %d", id, ms, e.Fence)
				}
			}
			if err := stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}
		})
	}
}

// fetchUntilOK calls fetch, pace apart, until it answers 200 (ok), at most
// attempts times within wait; it returns how many answers were refusals,
// and the last answer's body.
func fetchUntilOK(fetch func() (int, string), attempts int, wait, pace time.Duration) (ok bool, refused int, last string) {
	deadline := time.Now().Add(wait)
	for attempt := 0; attempt < attempts && time.Now().Before(deadline); attempt++ {
		var code int
		code, last = fetch()
		if code == http.StatusOK {
			return true, refused, last
		}
		refused++
		time.Sleep(pace)
	}
	return false, refused, last
}
