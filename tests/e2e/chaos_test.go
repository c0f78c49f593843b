package e2e

import (
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/cachefile"
	"codeberg.org/snowflaked/snowflaked/snowflake"
	testproc "codeberg.org/snowflaked/snowflaked/tests/proc"
)

func TestIntegration_ChaosClockRollbackLeavesAndReturnsToService(t *testing.T) {
	p := startNode(t, binChaos, nodeArgs(t.TempDir(), 2))
	p.waitReadyz(http.StatusOK, readyTimeout)
	before := p.ids(1000)
	maxBefore := before[len(before)-1]

	if code, body := p.do(http.MethodPost, "/debug/chaos/clock?offset=-5s"); code != http.StatusOK || !strings.Contains(body, `"offset":"-5s"`) {
		t.Fatalf("POST offset=-5s: %d %s", code, body)
	}
	// The rollback is seen on the next ID request: 503, and out of service.
	code, body := p.get("/id")
	if code != http.StatusServiceUnavailable {
		t.Fatalf("/id after a 5s rollback: %d %s", code, body)
	}
	_, ready := p.waitReadyz(http.StatusServiceUnavailable, readyTimeout)
	if !strings.Contains(ready, `"reason":"clock_rollback"`) {
		t.Errorf("/readyz body %s, want reason clock_rollback", ready)
	}
	if code, body := p.get("/id"); code != http.StatusServiceUnavailable {
		t.Errorf("/id while out of service: %d %s", code, body)
	}

	if code, body := p.do(http.MethodPost, "/debug/chaos/clock?offset=0"); code != http.StatusOK {
		t.Fatalf("POST offset=0: %d %s", code, body)
	}
	back, _ := p.waitReadyz(http.StatusOK, readyTimeout)
	t.Logf("back in service %s after the offset was reset", back)
	after := p.ids(1000)
	if after[0] <= maxBefore {
		t.Fatalf("ID after the rollback %d <= last before %d", after[0], maxBefore)
	}

	for _, tc := range []struct {
		method, query string
		want          int
		code          string
	}{
		{http.MethodGet, "?offset=1s", http.StatusMethodNotAllowed, ""},
		{http.MethodPost, "", http.StatusBadRequest, "invalid_offset"},
		{http.MethodPost, "?offset=yesterday", http.StatusBadRequest, "invalid_offset"},
	} {
		code, body := p.do(tc.method, "/debug/chaos/clock"+tc.query)
		if code != tc.want || !strings.Contains(body, tc.code) {
			t.Errorf("%s /debug/chaos/clock%s: %d %s, want %d %s", tc.method, tc.query, code, body, tc.want, tc.code)
		}
	}
	p.signal(syscall.SIGTERM)
	if code := p.exitCode(); code != 0 {
		t.Errorf("exit %d", code)
	}
}

func TestIntegration_ChaosEndpointAbsentFromProductionBuild(t *testing.T) {
	p := startNode(t, binSnowflaked, nodeArgs(t.TempDir(), 2))
	p.waitReadyz(http.StatusOK, readyTimeout)
	for _, m := range []string{http.MethodPost, http.MethodGet} {
		for _, path := range []string{"/debug/chaos/clock?offset=-5s", "/debug/chaos/disk?hang=true"} {
			if code, body := p.do(m, path); code != http.StatusNotFound {
				t.Errorf("%s %s on the production build: %d %s, want 404", m, path, code, body)
			}
		}
	}
	if code, _ := p.get("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz %d after the chaos request", code)
	}

	// The fault-injection code is not even linked in.
	for _, marker := range []string{"offsetClock", "diskGate"} {
		checkNoSymbol(t, marker)
	}
}

// checkNoSymbol checks that the chaos build has a symbol containing marker
// and the production build none (nor any debug/chaos string).
func checkNoSymbol(t *testing.T, marker string) {
	t.Helper()
	symbols := func(bin string) string {
		t.Helper()
		out, err := exec.Command(testproc.GoTool(), "tool", "nm", bin).CombinedOutput()
		if err != nil {
			t.Fatalf("go tool nm %s: %v\n%s", bin, err, out)
		}
		return string(out)
	}
	if !strings.Contains(symbols(binChaos), marker) {
		t.Fatalf("the chaos build has no %s symbol: the check below would prove nothing", marker)
	}
	for _, line := range strings.Split(symbols(binSnowflaked), "\n") {
		if strings.Contains(line, marker) || strings.Contains(strings.ToLower(line), "debug/chaos") {
			t.Errorf("production binary has chaos symbol: %s", line)
		}
	}
}

// A forward jump of the clock (chaos build) by twice --fence-ahead is
// suspect: the node leaves service with clock_jump and persists
// no fence on the jumped time. When the jump is undone (a bad NTP source
// corrected, say) it is back in service at once, and its cache file never
// carried the bad time, so a restart would not have to wait for it.
func TestIntegration_ChaosForwardJumpPastFence(t *testing.T) {
	const ahead = 3 * time.Second
	dir := t.TempDir()
	p := startNode(t, binChaos, nodeArgs(dir, 6, "--fence-ahead", ahead.String()))
	p.waitReadyz(http.StatusOK, readyTimeout)
	before := p.ids(1000)

	if code, body := p.do(http.MethodPost, "/debug/chaos/clock?offset="+(2*ahead).String()); code != http.StatusOK {
		t.Fatalf("POST offset=%s: %d %s", 2*ahead, code, body)
	}
	jumpedAt := time.Now()
	jumped := jumpedAt.Add(2 * ahead).UnixMilli()
	_, body := p.waitReadyz(http.StatusServiceUnavailable, readyTimeout)
	if !strings.Contains(body, `"reason":"clock_jump"`) {
		t.Fatalf("/readyz after a forward jump of %s: %s, want clock_jump", 2*ahead, body)
	}
	outAfter := time.Since(jumpedAt)
	if code, body := p.get("/id"); code != http.StatusServiceUnavailable {
		t.Fatalf("/id on the suspect time: %d %s", code, body)
	}
	// Hold it over a few fence-keeper ticks (every fence-ahead/3 = 1s).
	for time.Since(jumpedAt) < 2*time.Second {
		time.Sleep(50 * time.Millisecond)
	}
	held, err := cachefile.Load(filepath.Join(dir, "cache.json"))
	if err != nil {
		t.Fatal(err)
	}
	if held.Fence >= snowflake.UnixMilli(jumped) {
		t.Fatalf("fence in the cache file %d carries the suspect time %d", held.Fence, jumped)
	}

	if code, body := p.do(http.MethodPost, "/debug/chaos/clock?offset=0"); code != http.StatusOK {
		t.Fatalf("POST offset=0: %d %s", code, body)
	}
	undoneAt := time.Now()
	p.waitReadyz(http.StatusOK, readyTimeout)
	t.Logf("forward jump of %s: out of service (clock_jump) after %s; back %s after it was undone; cache fence stayed %d ms before the jumped time",
		2*ahead, outAfter.Round(time.Millisecond), time.Since(undoneAt).Round(time.Millisecond), jumped-int64(held.Fence))
	checkIDs(t, before, p.ids(1000))
	if v := p.metrics()[series("snowflaked_transitions_total", "reason", "clock_jump")]; v < 1 {
		t.Errorf("snowflaked_transitions_total{reason=\"clock_jump\"} = %v, want at least 1", v)
	}
}
