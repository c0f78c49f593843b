package e2e

import (
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/cachefile"
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

// A forward jump of the clock (chaos build) by twice --fence-ahead puts the
// clock past the persisted fence while the node stays in service: the
// first refused request (503 fence_reached) makes the node persist a new
// fence at once, so IDs flow again within a few requests, long before the
// fence keeper's next tick (--fence-ahead/3 = 10s), and the fence in the
// cache file covers every ID issued after the jump.
func TestIntegration_ChaosForwardJumpPastFence(t *testing.T) {
	const ahead = 30 * time.Second
	// Bounded in count and time; paced, so that a slow fence write (an
	// fsync can take tens of ms) does not use up the attempts.
	const maxAttempts, maxWait, pace = 1000, 5 * time.Second, 2 * time.Millisecond
	dir := t.TempDir()
	p := startNode(t, binChaos, nodeArgs(dir, 6, "--fence-ahead", ahead.String()))
	p.waitReadyz(http.StatusOK, readyTimeout)
	p.ids(10)
	before, err := cachefile.Load(filepath.Join(dir, "cache.json"))
	if err != nil {
		t.Fatal(err)
	}
	m0 := p.metrics()

	if code, body := p.do(http.MethodPost, "/debug/chaos/clock?offset="+(2*ahead).String()); code != http.StatusOK {
		t.Fatalf("POST offset=%s: %d %s", 2*ahead, code, body)
	}
	jumped := time.Now().Add(2 * ahead).UnixMilli()
	refused, start := 0, time.Now()
	var ids []int64
	for attempt := 0; attempt < maxAttempts && time.Since(start) < maxWait; attempt++ {
		code, body := p.get("/id")
		if code == http.StatusOK {
			ids = parseIDs(t, body)
			break
		}
		if code != http.StatusServiceUnavailable || !strings.Contains(body, `"code":"fence_reached"`) {
			t.Fatalf("/id after a forward jump: %d %s, want 200 or 503 fence_reached", code, body)
		}
		refused++
		time.Sleep(pace)
	}
	if len(ids) == 0 {
		t.Fatalf("no ID within %d attempts / %s after a forward jump of %s (%d refused)", maxAttempts, maxWait, 2*ahead, refused)
	}
	t.Logf("forward jump of %s: %d request(s) refused with fence_reached, first ID %s after the jump", 2*ahead, refused, time.Since(start).Round(time.Millisecond))
	if code, _ := p.get("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz %d after the jump", code)
	}
	ids = append(ids, p.ids(1000)...)
	after, err := cachefile.Load(filepath.Join(dir, "cache.json"))
	if err != nil {
		t.Fatal(err)
	}
	if after.Fence < before.Fence || after.Fence < jumped {
		t.Errorf("fence in the cache file %d: below the one before the jump %d or the jumped clock %d", after.Fence, before.Fence, jumped)
	}
	for _, id := range ids {
		if ms, _ := decodeMs(id); ms > after.Fence {
			t.Fatalf("ID %d at %d is beyond the fence in the cache file %d", id, ms, after.Fence)
		}
	}
	m1 := p.metrics()
	fence := series("snowflaked_generator_refusals_total", "cause", "fence")
	if got := m1[fence] - m0[fence]; got != float64(refused) {
		t.Errorf("%s grew by %v, want %d", fence, got, refused)
	}
}
