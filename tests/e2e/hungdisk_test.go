package e2e

import (
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// A disk whose writes hang (not fail). The node must not become a
// black hole (in service, alive znode present, every /id 503): the fence
// write has a deadline, so it leaves service with fence_persist_failed and
// deletes its alive znode; /clock and /metrics still answer (nothing reads
// the fence under the writer's lock); SIGTERM still exits within
// --shutdown-timeout; and a restart on the same disk reissues nothing.
func TestIntegration_ChaosHungDiskLeavesServiceAndStopsInTime(t *testing.T) {
	zk := zkharness.StartStandalone(t)
	dir := t.TempDir()
	const shutdown = 3 * time.Second
	args := clusterArgs(dir, zk.ConnectString(), "hung", "node-h", "--shutdown-timeout", shutdown.String())
	p := startNode(t, binChaos, args)
	p.waitReadyz(http.StatusOK, readyTimeout)
	waitRow(t, zk, "hung", "node-h", readyTimeout, func(r coordinator.WorkerInfo) bool { return r.InService })
	before := p.ids(2000)

	hungAt := time.Now()
	if code, body := p.do(http.MethodPost, "/debug/chaos/disk?hang=true"); code != http.StatusOK {
		t.Fatalf("hang the disk: %d %s", code, body)
	}
	_, body := p.waitReadyz(http.StatusServiceUnavailable, readyTimeout)
	outAfter := time.Since(hungAt)
	if !strings.Contains(body, `"reason":"fence_persist_failed"`) ||
		!strings.Contains(body, "did not finish within") && !strings.Contains(body, "previous fence write still running") {
		t.Fatalf("/readyz with a hung disk: %s", body)
	}
	waitRow(t, zk, "hung", "node-h", readyTimeout, func(r coordinator.WorkerInfo) bool { return !r.InService })
	goneAfter := time.Since(hungAt)
	for _, path := range []string{"/clock", "/metrics"} {
		if code, _ := p.get(path); code != http.StatusOK {
			t.Errorf("%s with a hung disk: %d", path, code)
		}
	}
	if code, body := p.get("/id"); code != http.StatusServiceUnavailable {
		t.Errorf("/id with a hung disk: %d %s", code, body)
	}

	termAt := time.Now()
	p.signal(syscall.SIGTERM)
	code := p.exitCode()
	stopTook := time.Since(termAt)
	if stopTook > shutdown+2*time.Second {
		t.Errorf("SIGTERM with a hung disk took %s, --shutdown-timeout is %s", stopTook, shutdown)
	}
	t.Logf("disk hung: out of service after %s, alive znode gone after %s; SIGTERM exited %d after %s (--shutdown-timeout %s)",
		outAfter.Round(time.Millisecond), goneAfter.Round(time.Millisecond), code, stopTook.Round(time.Millisecond), shutdown)

	q := startNode(t, binChaos, args) // the hang went with the process
	q.waitReadyz(http.StatusOK, readyTimeout)
	checkIDs(t, before, q.ids(2000))
}
