package node

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/cachefile"
	"codeberg.org/snowflaked/snowflaked/internal/clock/clocktest"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// httpGet returns the status and body of GET http://addr+path.
func httpGet(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	cl := &http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get("http://" + addr + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(b)
}

// waitHTTP polls GET path until cond holds, for at most 10s.
func waitHTTP(t *testing.T, addr, path string, cond func(code int, body string) bool) (int, string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body := httpGet(t, addr, path)
		if cond(code, body) {
			return code, body
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: condition not met within 10s (last %d %s)", path, code, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A restart whose clock is behind the fence by more than --max-start-wait
// (the clock went back while the node was down) runs but stays out of
// service with reason clock_behind_fence, issues nothing, and enters service
// by itself once the clock passes the fence.
func TestRunBehindFenceBeyondMaxStartWaitStaysOutOfService(t *testing.T) {
	clk := clocktest.NewFake(time.Now())
	cfg := testConfig(t, 5)
	cfg.MaxStartWait = 10 * time.Second
	fence := time.Unix(0, clk.WallNanos()).Add(time.Hour).UnixMilli()
	if err := cachefile.Save(cfg.CacheFile, cachefile.Entry{WorkerID: 5, Layout: snowflake.DefaultLayout(), Fence: snowflake.UnixMilli(fence)}); err != nil {
		t.Fatal(err)
	}
	ln := loopbackListener(t)
	addr := ln.Addr().String()
	stop := startRunOn(t, cfg, ln, withClock(clk))

	_, body := waitHTTP(t, addr, "/readyz", func(code int, body string) bool {
		return code == http.StatusServiceUnavailable && strings.Contains(body, `"reason":"clock_behind_fence"`)
	})
	for _, s := range []string{"behind the fence", "max-start-wait 10s"} {
		if !strings.Contains(body, s) {
			t.Errorf("/readyz detail lacks %q: %s", s, body)
		}
	}
	if code, body := httpGet(t, addr, "/id"); code != http.StatusServiceUnavailable {
		t.Fatalf("/id behind the fence: %d %s", code, body)
	}
	// It stays out: the gate re-checks every 100ms and the clock does not move.
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		if code, body := httpGet(t, addr, "/readyz"); code != http.StatusServiceUnavailable {
			t.Fatalf("/readyz left clock_behind_fence without the clock moving: %d %s", code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var rep ClockInfo
	if code, body := httpGet(t, addr, "/clock"); code != http.StatusOK || json.Unmarshal([]byte(body), &rep) != nil {
		t.Fatalf("/clock: %d %s", code, body)
	}
	if rep.Reason != "clock_behind_fence" || rep.Failing["clock_behind_fence"] == "" || rep.Transitions["clock_behind_fence"] != 1 {
		t.Errorf("/clock report: reason %q failing %v transitions %v", rep.Reason, rep.Failing, rep.Transitions)
	}

	clk.Advance(time.Hour + time.Second)
	waitHTTP(t, addr, "/readyz", func(code int, _ string) bool { return code == http.StatusOK })
	// The jump of the fake clock also passed the running fence (now +
	// fence-ahead at the jump): the first refusal wakes the fence keeper.
	_, body = waitHTTP(t, addr, "/id", func(code int, _ string) bool { return code == http.StatusOK })
	id, err := strconv.ParseInt(strings.TrimSpace(body), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	parts, err := snowflake.DefaultLayout().Decode(id)
	if err != nil {
		t.Fatal(err)
	}
	if ms := parts.Time.UnixMilli(); ms <= fence || parts.WorkerID != 5 {
		t.Errorf("first ID at %d worker %d, want after the fence %d, worker 5", ms, parts.WorkerID, fence)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}
