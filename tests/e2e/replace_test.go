package e2e

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// freeAddr returns a loopback address with a port that was free a moment
// ago: for a process whose port must be polled before it logs it.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// startObservation is what polling a starting node saw.
type startObservation struct {
	healthzAt time.Duration       // first /healthz 200 after the process started
	readyAt   time.Duration       // first /readyz 200
	failures  int                 // requests unanswered after /healthz first answered
	firstFail string              // the first of them
	reasons   []string            // every /readyz reason, in order of first sight
	details   map[string][]string // every detail seen, per reason
	idBodies  map[int]string      // a body of /id per status seen
	clock     string              // a /clock body while waiting for the previous holder
	metrics   string              // a /metrics body while waiting for the previous holder
}

// observeStart polls /healthz, /readyz and /id of a starting node from
// the moment its process started until /readyz answers 200 or timeout.
func observeStart(t *testing.T, addr string, started time.Time, timeout time.Duration) startObservation {
	t.Helper()
	cl := &http.Client{Timeout: 500 * time.Millisecond}
	get := func(path string) (int, string, error) {
		resp, err := cl.Get("http://" + addr + path)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	obs := startObservation{details: map[string][]string{}, idBodies: map[int]string{}}
	fail := func(what string, err error) {
		if obs.healthzAt == 0 {
			return // not listening yet
		}
		obs.failures++
		if obs.firstFail == "" {
			obs.firstFail = what + ": " + err.Error()
		}
	}
	deadline := started.Add(timeout)
	for i := 0; i < 100000 && time.Now().Before(deadline); i++ {
		if code, _, err := get("/healthz"); err != nil {
			fail("/healthz", err)
		} else if code == http.StatusOK && obs.healthzAt == 0 {
			obs.healthzAt = time.Since(started)
		}
		code, body, err := get("/readyz")
		if err != nil {
			fail("/readyz", err)
			time.Sleep(pollEvery)
			continue
		}
		if code == http.StatusOK {
			obs.readyAt = time.Since(started)
			return obs
		}
		var r struct{ Reason, Detail string }
		if json.Unmarshal([]byte(body), &r) != nil {
			t.Fatalf("/readyz %d %q is not JSON", code, body)
		}
		if !slices.Contains(obs.reasons, r.Reason) {
			obs.reasons = append(obs.reasons, r.Reason)
		}
		if len(obs.details[r.Reason]) < 1000 && !slices.Contains(obs.details[r.Reason], r.Detail) {
			obs.details[r.Reason] = append(obs.details[r.Reason], r.Detail)
		}
		if code, body, err := get("/id"); err != nil {
			fail("/id", err)
		} else if rc, _, rerr := get("/readyz"); code == http.StatusOK && rerr == nil && rc == http.StatusOK {
			// It came into service between the two requests (a loaded
			// machine widens the gap): an ID is wrong only while /readyz,
			// asked after it, still says no.
			obs.readyAt = time.Since(started)
			return obs
		} else if _, seen := obs.idBodies[code]; !seen {
			obs.idBodies[code] = body
		}
		if r.Reason == "prev_holder_fence" && obs.clock == "" {
			_, obs.clock, _ = get("/clock")
			_, obs.metrics, _ = get("/metrics")
		}
		time.Sleep(pollEvery)
	}
	t.Fatalf("not in service within %s of the start: reasons seen %v, details %v", timeout, obs.reasons, obs.details)
	return obs
}

// A node killed -9 and started again with the same node key on a new,
// empty disk (a replaced machine) must wait for its dead predecessor's
// lease and then for the predecessor's ZooKeeper fence. Its port answers
// from the first second (/healthz 200, /readyz 503 starting saying what it
// waits for, /id 503 with a JSON code: a liveness probe would kill a pod
// whose port stays closed), it never blames its clock for the wait (it
// reported clock_behind_fence, "the clock went back while the node was
// down", 187 times), and it serves within --zk-fence-ahead + 10 s.
func TestIntegration_ClusterReplacedDiskSaysWhatItWaitsFor(t *testing.T) {
	const (
		zkAhead = 10 * time.Second // --zk-fence-ahead: the predecessor's fence is up to this ahead
		session = 4 * time.Second  // its lease lingers this long after the kill
	)
	zk := zkharness.StartStandalone(t)
	// --max-start-wait 2s: shorter than the wait for the predecessor's fence.
	extra := []string{"--zk-fence-ahead", zkAhead.String(), "--zk-session-timeout", session.String(), "--max-start-wait", "2s"}
	p := startNode(t, binSnowflaked, clusterArgs(t.TempDir(), zk.ConnectString(), "replace", "node-r", extra...))
	p.waitReadyz(http.StatusOK, readyTimeout)
	before := p.ids(5000)
	worker := workerOf(t, before)
	// A renewal or two after the first IDs: the fence in ZooKeeper is the
	// one a running node keeps, about --zk-fence-ahead ahead.
	time.Sleep(2 * reportInterval)
	p.signal(syscall.SIGKILL)
	p.exitCode()

	addr := freeAddr(t)
	newDisk := t.TempDir()
	started := time.Now()
	q := start(t, binSnowflaked, clusterArgs(newDisk, zk.ConnectString(), "replace", "node-r", append(extra, "--listen", addr)...))
	q.addr = addr
	obs := observeStart(t, addr, started, zkAhead+10*time.Second)
	est := q.waitLog("worker ID established", time.Second)
	claimTook := time.Duration(number(t, est, "claim_took_ms") * float64(time.Millisecond))
	t.Logf("replacement: /healthz 200 after %s, in service after %s (claim took %s); /readyz reasons %v", obs.healthzAt.Round(time.Millisecond),
		obs.readyAt.Round(time.Millisecond), claimTook.Round(time.Millisecond), obs.reasons)
	for _, r := range obs.reasons {
		d := obs.details[r]
		t.Logf("%s: %d details, the first %q, the last %q", r, len(d), d[0], d[len(d)-1])
	}

	if obs.healthzAt == 0 || obs.healthzAt > time.Second {
		t.Errorf("/healthz first answered 200 after %s, want within 1s of the start", obs.healthzAt)
	}
	if obs.failures > 0 {
		t.Errorf("%d requests unanswered after the port first answered, the first: %s", obs.failures, obs.firstFail)
	}
	for _, r := range obs.reasons {
		if r != "starting" && r != "prev_holder_fence" {
			t.Errorf("/readyz reason %q while the replacement waited (detail %q): want only starting and prev_holder_fence", r, obs.details[r])
		}
	}
	// The claim's wait is the dead session's lease: /readyz says so.
	if !slices.ContainsFunc(obs.details["starting"], func(d string) bool { return strings.Contains(d, "waiting for the lease on worker ID") }) {
		t.Errorf("no /readyz detail named the dead session's lease while the claim waited for it: %q", obs.details["starting"])
	}
	prev := strings.Join(obs.details["prev_holder_fence"], "\n")
	for _, s := range []string{"previous holder's ZooKeeper fence", `node key "node-r"`, "left"} {
		if !strings.Contains(prev, s) {
			t.Errorf("prev_holder_fence details %q lack %q", prev, s)
		}
	}
	if limit := zkAhead + 10*time.Second; obs.readyAt > limit {
		t.Errorf("in service %s after the start, more than --zk-fence-ahead + 10s (%s)", obs.readyAt, limit)
	}
	for code, body := range obs.idBodies {
		if code != http.StatusServiceUnavailable || !strings.Contains(body, `"code":"out_of_service"`) {
			t.Errorf("/id while starting: %d %s, want 503 out_of_service", code, body)
		}
	}
	if !strings.Contains(obs.clock, `"prev_holder_fence":{"node_key":"node-r"`) || !strings.Contains(obs.clock, `"reason":"prev_holder_fence"`) {
		t.Errorf("/clock while waiting for the previous holder: %s", obs.clock)
	}
	for _, s := range []string{`snowflaked_state_reason{reason="prev_holder_fence"} 1`, `snowflaked_state{state="starting"} 1`, "snowflaked_prev_holder_fence_wait_seconds "} {
		if !strings.Contains(obs.metrics, s) {
			t.Errorf("/metrics while waiting for the previous holder lacks %s", s)
		}
	}
	if m, ok := q.FindLog("waiting for the previous holder's ZooKeeper fence before serving (prev_holder_fence)"); !ok || m["prev_node_key"] != "node-r" {
		t.Errorf("no log line naming the previous holder: %v", m)
	}

	after := q.ids(2000)
	if workerOf(t, after) != worker || after[0] <= slices.Max(before) {
		t.Fatalf("after the replacement: worker %d, first ID %d; before: worker %d, last ID %d", workerOf(t, after), after[0], worker, slices.Max(before))
	}
	checkIDs(t, before, after)
}
