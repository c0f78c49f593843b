package ctl

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// node retire while the node key's lease is held: a node that answers at
// its address is a running process to stop first; one that does not
// (killed: its session lingers until ZooKeeper expires it) is a wait,
// said with the session, the session timeout and retry.
func TestIntegration_RetireHeldLeaseOfADeadNode(t *testing.T) {
	zk := zkharness.StartStandalone(t)
	z := zk.ConnectString()
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(live.Close)
	startWorker(t, zk, "retire", "live", strings.TrimPrefix(live.URL, "http://"), false)
	dead := testsupport.ClosedAddr(t)
	startWorker(t, zk, "retire", "dead", dead, false)
	for _, tc := range []struct {
		key          string
		want, unwant []string
	}{
		{"live", []string{`lease /snowflaked/retire/leases/0 is held by node key "live"`, "stop that node first (retire is for nodes that are gone)"},
			[]string{"has not expired"}},
		{"dead", []string{`node key "dead" cannot be retired yet: its worker ID's lease /snowflaked/retire/leases/1 is held by node key "dead" at ` + dead,
			"and the node does not answer there (connection refused)", "the node's last session 0x", "has not expired yet: it expires within 7s",
			"one --zk-session-timeout, 7s, after its last contact; its last report was ", "retry then, or, if the node runs but cannot be reached from here, stop it first"},
			[]string{"stop that node first (retire", "another process"}},
	} {
		var stdout, stderr bytes.Buffer
		code := Main([]string{"node", "retire", tc.key, "--cluster", "retire", "--zk", z, "--zk-session-timeout", "7s"}, &stdout, &stderr)
		if code != exitUsage {
			t.Errorf("retire %s: exit %d, want 2; %s", tc.key, code, stderr.String())
		}
		for _, s := range tc.want {
			if !strings.Contains(stderr.String(), s) {
				t.Errorf("retire %s: stderr lacks %q:\n%s", tc.key, s, stderr.String())
			}
		}
		for _, s := range tc.unwant {
			if strings.Contains(stderr.String(), s) {
				t.Errorf("retire %s: stderr has %q:\n%s", tc.key, s, stderr.String())
			}
		}
	}
}

// A holder whose port takes connections but says nothing (a frozen
// process) does not answer; one that answers anything, or closes the
// connection (HTTPS met with plain HTTP), does.
func TestNodeAnswers(t *testing.T) {
	frozen, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { frozen.Close() })
	closing, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closing.Close() })
	go func() {
		for {
			c, err := closing.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if why, ok := nodeAnswers(frozen.Addr().String(), 200*time.Millisecond); ok || !strings.Contains(why, "said nothing") {
		t.Errorf("frozen: %v %q", ok, why)
	}
	if why, ok := nodeAnswers(closing.Addr().String(), time.Second); !ok {
		t.Errorf("closing: not answering: %q", why)
	}
	if why, ok := nodeAnswers(testsupport.ClosedAddr(t), time.Second); ok || !strings.Contains(why, "refused") {
		t.Errorf("closed: %v %q", ok, why)
	}
	msg := `node key "k" cannot be retired: its worker ID's lease /snowflaked/c/leases/3 is held by node key "k" at ` + frozen.Addr().String() +
		` (session 0x1f); stop that node first (retire is for nodes that are gone)`
	old := answerTimeout
	answerTimeout = 100 * time.Millisecond
	t.Cleanup(func() { answerTimeout = old })
	got := heldLease(msg, 10*time.Second, func() (coordinator.WorkerInfo, bool) { return coordinator.WorkerInfo{}, false })
	if !strings.Contains(got, "session 0x1f has not expired yet: it expires within 10s") || strings.Contains(got, "last report") {
		t.Errorf("heldLease = %q", got)
	}
	if got := heldLease("something else", time.Second, nil); got != "something else" {
		t.Errorf("heldLease of another error = %q", got)
	}
}
