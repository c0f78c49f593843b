package node

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/clockguard"
	"codeberg.org/snowflaked/snowflaked/internal/clock/clocktest"
	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// A clock set past the end of the layout's time field: the request fails
// with time_overflow and the node leaves service with that reason (it no
// longer looks in service while every /id fails); once the clock is set
// back before the end it returns by itself.
func TestRunTimeOverflowLeavesServiceAndReturns(t *testing.T) {
	now := time.Now()
	_, epoch := layoutEnding(t, now, time.Minute)
	clk := clocktest.NewFake(now)
	cfg := testConfig(t, 2)
	cfg.Layout, cfg.Epoch = "37/10/12", epoch
	ln := loopbackListener(t)
	addr := ln.Addr().String()
	startRunOn(t, cfg, ln, withClock(clk))
	waitHTTP(t, addr, "/readyz", func(code int, _ string) bool { return code == http.StatusOK })
	if code, body := httpGet(t, addr, "/id"); code != http.StatusOK {
		t.Fatalf("before the end: %d %s", code, body)
	}

	clk.StepWall(2 * time.Minute) // past the end: first a suspect jump...
	waitHTTP(t, addr, "/readyz", func(code int, body string) bool {
		return code == http.StatusServiceUnavailable && strings.Contains(body, `"reason":"clock_jump"`)
	})
	clk.Advance(clockguard.JumpHold) // ...accepted after clockguard.JumpHold, as nothing can confirm it
	// The first refusals may be fence_reached (the fence keeper catches up);
	// then time_overflow. Bounded in count and time.
	var last string
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; i < 500 && time.Now().Before(deadline); i++ {
		code, body := httpGet(t, addr, "/id")
		last = body
		if code == http.StatusServiceUnavailable && strings.Contains(body, `"code":"time_overflow"`) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !strings.Contains(last, "time_overflow") {
		t.Fatalf("no time_overflow after the clock passed the end: %s", last)
	}
	_, body := waitHTTP(t, addr, "/readyz", func(code int, body string) bool {
		return code == http.StatusServiceUnavailable && strings.Contains(body, `"reason":"time_overflow"`)
	})
	t.Logf("past the layout's end: %s", body)

	clk.StepWall(-2*time.Minute - clockguard.JumpHold) // before the end again
	waitHTTP(t, addr, "/readyz", func(code int, _ string) bool { return code == http.StatusOK })
	if code, body := httpGet(t, addr, "/id"); code != http.StatusOK {
		t.Fatalf("after the clock was set back: %d %s", code, body)
	}
}

// The generator's ErrClockStalled (the wall clock did not reach the next
// tick while it waited) takes the node out with clock_stalled until the
// wall clock moves on by a tick.
func TestRunClockStalledLeavesServiceAndReturns(t *testing.T) {
	clk := clocktest.NewFake(time.Now())
	n := runInService(t, testConfig(t, 3), withClock(clk))
	n.onIDError(fmt.Errorf("%w: waited 1.2s for tick 42", snowflake.ErrClockStalled))
	if st := n.guard.Status(); st.State != health.OutOfService || st.Reason != health.ReasonClockStalled {
		t.Fatalf("after ErrClockStalled: %+v", st)
	}
	n.stalled.TryClear()
	if n.guard.Ready() {
		t.Fatal("back in service while the wall clock has not moved")
	}
	clk.Advance(2 * n.layout.Unit)
	n.stalled.TryClear()
	if !n.guard.Ready() {
		t.Fatalf("not back once the clock moved on: %+v", n.guard.Status())
	}
}
