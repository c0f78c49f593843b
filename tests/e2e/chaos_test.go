package e2e

import (
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
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
		if code, body := p.do(m, "/debug/chaos/clock?offset=-5s"); code != http.StatusNotFound {
			t.Errorf("%s /debug/chaos/clock on the production build: %d %s, want 404", m, code, body)
		}
	}
	if code, _ := p.get("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz %d after the chaos request", code)
	}

	// The fault-injection code is not even linked in.
	const marker = "offsetClock"
	symbols := func(bin string) string {
		t.Helper()
		out, err := exec.Command(goTool(), "tool", "nm", bin).CombinedOutput()
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
