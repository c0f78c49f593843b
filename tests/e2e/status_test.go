package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// statusWorker is what the test reads of a row of snowflakectl status --json.
type statusWorker struct {
	NodeKey   string `json:"node_key"`
	Version   string `json:"version"`
	InService bool   `json:"in_service"`
	Reason    string `json:"reason"`
	Dead      bool   `json:"dead"`
}

// TestIntegration_StatusShowsVersionAndDeadNode: snowflakectl status shows
// each node's version, and a killed node's row says it is dead and why
// (not reporting, or its lease gone, and its /readyz unreachable).
func TestIntegration_StatusShowsVersionAndDeadNode(t *testing.T) {
	zk := zkharness.StartStandalone(t)
	dir1, dir2 := t.TempDir(), t.TempDir()
	live := startNode(t, binSnowflaked, clusterArgs(dir1, zk.ConnectString(), "dead", "node-1"))
	dead := startNode(t, binSnowflaked, clusterArgs(dir2, zk.ConnectString(), "dead", "node-2"))
	live.waitReadyz(http.StatusOK, readyTimeout)
	dead.waitReadyz(http.StatusOK, readyTimeout)
	dead.signal(syscall.SIGKILL)
	dead.exitCode()

	args := []string{"status", "--zk", zk.ConnectString(), "--cluster", "dead", "--report-interval", reportInterval.String()}
	var rows map[string]statusWorker
	deadline := time.Now().Add(zkSession + 10*reportInterval)
	for {
		code, out, errOut := ctl(t, append(args, "--json")...)
		if code != 0 {
			t.Fatalf("snowflakectl status --json: exit %d\n%s%s", code, out, errOut)
		}
		var got struct {
			Workers []statusWorker `json:"workers"`
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("status --json %q: %v", out, err)
		}
		rows = map[string]statusWorker{}
		for _, w := range got.Workers {
			rows[w.NodeKey] = w
		}
		if rows["node-2"].Dead {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("killed node-2 not shown dead within %v: %+v", zkSession+10*reportInterval, rows)
		}
		time.Sleep(50 * time.Millisecond)
	}
	n1, n2 := rows["node-1"], rows["node-2"]
	if !n1.InService || n1.Reason != "" || n1.Dead || n1.Version != "dev" {
		t.Errorf("live node-1: %+v, want in service, no reason, version dev (the test build's)", n1)
	}
	if n2.InService || n2.Version != "dev" || !strings.HasSuffix(n2.Reason, "; unreachable") ||
		(!strings.HasPrefix(n2.Reason, "not reporting") && !strings.HasPrefix(n2.Reason, "no lease")) {
		t.Errorf("killed node-2: %+v, want out of service, not reporting or no lease, unreachable", n2)
	}
	code, out, errOut := ctl(t, args...)
	if code != 0 || !strings.Contains(out, "VERSION") || !strings.Contains(out, "REASON") || !strings.Contains(out, "DEAD: ") {
		t.Errorf("snowflakectl status: exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("snowflakectl status:\n%s", out)
}

// TestIntegration_StatusShowsReportedReason: a node out of service writes
// its reason with its reports, so snowflakectl status names it without
// asking the node (--probe-timeout 0). The node's clock is stepped 5 s
// back; its two peers find it off.
func TestIntegration_StatusShowsReportedReason(t *testing.T) {
	zk := zkharness.StartStandalone(t)
	var nodes []*proc
	for i := 1; i <= 3; i++ {
		p := startNode(t, binChaos, clusterArgs(t.TempDir(), zk.ConnectString(), "why", fmt.Sprintf("node-%d", i), "--peer-max-offset", "1s"))
		p.waitReadyz(http.StatusOK, readyTimeout)
		nodes = append(nodes, p)
	}
	off := nodes[2]
	if code, body := off.do(http.MethodPost, "/debug/chaos/clock?offset=-5s"); code != http.StatusOK {
		t.Fatalf("POST offset=-5s: %d %s", code, body)
	}
	_, ready := off.waitReadyz(http.StatusServiceUnavailable, readyTimeout)
	var readyz struct {
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal([]byte(ready), &readyz); err != nil || readyz.Reason == "" {
		t.Fatalf("/readyz %s: no reason (%v)", ready, err)
	}
	want := readyz.Reason + " (reported)"
	args := []string{"status", "--json", "--probe-timeout", "0", "--zk", zk.ConnectString(), "--cluster", "why"}
	deadline := time.Now().Add(10 * reportInterval)
	for {
		code, out, errOut := ctl(t, args...)
		if code != 0 {
			t.Fatalf("snowflakectl status: exit %d\n%s%s", code, out, errOut)
		}
		var got struct {
			Workers []statusWorker `json:"workers"`
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("status --json %q: %v", out, err)
		}
		rows := map[string]statusWorker{}
		for _, w := range got.Workers {
			rows[w.NodeKey] = w
		}
		if w := rows["node-3"]; w.Reason == want && !w.InService && !w.Dead {
			if w1 := rows["node-1"]; !w1.InService || w1.Reason != "" {
				t.Errorf("node-1, in service, shows %+v", w1)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("status never showed %q for node-3 without asking it, within %v: %+v", want, 10*reportInterval, rows)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
