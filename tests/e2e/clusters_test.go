package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/snowflake"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// clusterNamesOf lists the clusters snowflakectl cluster list --json shows.
func clusterNamesOf(t *testing.T, zk *zkharness.Cluster) []string {
	t.Helper()
	code, out, errOut := ctl(t, "cluster", "list", "--zk", zk.ConnectString(), "--json")
	if code != 0 {
		t.Fatalf("cluster list: exit %d %s", code, errOut)
	}
	var rows []coordinator.ClusterInfo
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("cluster list --json %q: %v", out, err)
	}
	names := make([]string, len(rows))
	for i, r := range rows {
		names[i] = r.Name
	}
	return names
}

// TestMistypedClusterNeverServes: beside a running cluster prod, a node
// started with --cluster prdo exits 2 naming what it asked for, the
// clusters that exist and the near match; it creates nothing, never
// answers /id, and cluster list shows prod alone.
func TestMistypedClusterNeverServes(t *testing.T) {
	zk := zkharness.StartStandalone(t)
	z := zk.ConnectString()
	if code, out, errOut := ctl(t, "cluster", "create", "prod", "--zk", z); code != 0 {
		t.Fatalf("cluster create: exit %d %s %s", code, out, errOut)
	}
	args := func(dir, cluster, key string) []string {
		a := clusterArgs(dir, z, cluster, key)
		for i, s := range a { // not --create-cluster: the operator's command line
			if s == "--create-cluster" {
				return append(a[:i], a[i+1:]...)
			}
		}
		return a
	}
	prod := startNode(t, binSnowflaked, args(t.TempDir(), "prod", "prod-a"))
	prod.waitReadyz(http.StatusOK, readyTimeout)

	listen := freeAddr(t)
	a := args(t.TempDir(), "prdo", "prod-b")
	for i := range a {
		if a[i] == "127.0.0.1:0" {
			a[i] = listen
		}
	}
	typo := start(t, binSnowflaked, a)
	if code := mustNotServe(t, typo, listen); code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	for _, want := range []string{`cluster \"prdo\" does not exist`, "the clusters there are prod", "did you mean prod?"} {
		if !strings.Contains(typo.Output(), want) && !strings.Contains(typo.Output(), strings.ReplaceAll(want, `\"`, `"`)) {
			t.Errorf("output lacks %q:\n%s", want, typo.Tail(10))
		}
	}
	if names := clusterNamesOf(t, zk); len(names) != 1 || names[0] != "prod" {
		t.Errorf("cluster list shows %q, want prod alone", names)
	}
	if _, w := decodeMs(prod.ids(1)[0]); w != 0 {
		t.Errorf("prod serves worker %d", w)
	}
}

// TestRetireDeadNode: a cluster of one worker ID (7-7). Its node is
// killed; the next node key waits for recycle-after (an hour) until the
// operator retires the dead node, then takes worker 7 and issues IDs only
// after the dead holder's ZooKeeper fence. Retire is refused while the
// lease is held, and for a node key the cluster does not know.
func TestRetireDeadNode(t *testing.T) {
	zk := zkharness.StartStandalone(t)
	z := zk.ConnectString()
	opts := []string{"--worker-id-range", "7-7", "--recycle-after", "1h", "--zk-fence-ahead", "3s"}
	a := startNode(t, binSnowflaked, clusterArgs(t.TempDir(), z, "one", "dead", opts...))
	a.waitReadyz(http.StatusOK, readyTimeout)
	if _, w := decodeMs(a.ids(1)[0]); w != 7 {
		t.Fatalf("first node serves worker %d, want 7", w)
	}
	for _, tc := range []struct {
		key, want string
	}{
		{"dead", `its worker ID's lease /snowflaked/one/leases/7 is held by node key "dead"`},
		{"ghost", `no forever znode for node key "ghost" (its node keys are dead)`},
	} {
		if code, _, errOut := ctl(t, "node", "retire", tc.key, "--cluster", "one", "--zk", z); code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("retire %s: exit %d %q, want 2 with %q", tc.key, code, errOut, tc.want)
		}
	}

	a.signal(syscall.SIGKILL)
	a.exitCode()
	deadline := time.Now().Add(staleLeaseWait + 10*time.Second)
	for {
		code, out, errOut := ctl(t, "node", "retire", "dead", "--cluster", "one", "--zk", z)
		if code == 0 {
			if !strings.Contains(out, `retired node key "dead" of cluster "one": worker ID 7 may be taken over now`) {
				t.Errorf("retire output %q", out)
			}
			break
		}
		if code != 2 || !strings.Contains(errOut, "is held by") || time.Now().After(deadline) {
			t.Fatalf("retire after the kill: exit %d %q", code, errOut)
		}
		time.Sleep(100 * time.Millisecond)
	}
	dead := workerRows(t, zk, "one")["dead"]
	fence := dead.Fence
	if fence <= 0 || dead.Retired <= 0 {
		t.Fatalf("the dead node's row has no fence: %+v", workerRows(t, zk, "one"))
	}

	b := startNode(t, binSnowflaked, clusterArgs(t.TempDir(), z, "one", "next", opts...))
	b.waitReadyz(http.StatusOK, readyTimeout)
	for _, id := range b.ids(100) {
		ms, w := decodeMs(id)
		if w != 7 || snowflake.UnixMilli(ms) <= fence {
			t.Fatalf("ID %d: worker %d at %d ms, want worker 7 after the retired fence %d", id, w, ms, fence)
		}
	}
	if r := workerRows(t, zk, "one")["dead"]; r.WorkerID != -1 {
		t.Errorf("the retired row still holds worker %d", r.WorkerID)
	}
}

// TestIntegration_ClusterSetRecycleAfterFollowed: nodes without
// --recycle-after follow the cluster's value, and their start line says
// which value and where it came from; after snowflakectl cluster set a new
// node uses the new value (cluster list shows it), one that sets it
// explicitly to that value joins, and one set to the old value is refused
// (exit 2) saying how to follow the cluster's.
func TestIntegration_ClusterSetRecycleAfterFollowed(t *testing.T) {
	zk := zkharness.StartStandalone(t)
	z := zk.ConnectString()
	checkStart := func(key, want, from string, extra ...string) {
		t.Helper()
		p := start(t, binSnowflaked, clusterArgs(t.TempDir(), z, "follow", key, extra...))
		m := p.waitStarted()
		if got, _ := m["recycle_after"].(string); got != want {
			t.Errorf("%s: start line recycle_after %q, want %q: %v", key, got, want, m)
		}
		if got, _ := m["recycle_after_from"].(string); !strings.Contains(got, from) {
			t.Errorf("%s: start line recycle_after_from %q, want it to contain %q", key, got, from)
		}
	}
	checkStart("a", "24h0m0s", "the cluster's (--recycle-after unset)")
	code, out, errOut := ctl(t, "cluster", "set", "follow", "--recycle-after", "5m", "--zk", z)
	if code != 0 || !strings.Contains(out, `cluster "follow": recycle-after 24h0m0s → 5m0s`) {
		t.Fatalf("cluster set: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	checkStart("b", "5m0s", "the cluster's (--recycle-after unset)")
	checkStart("c", "5m0s", "--recycle-after (equal to the cluster's)", "--recycle-after", "5m")
	d := start(t, binSnowflaked, clusterArgs(t.TempDir(), z, "follow", "d", "--recycle-after", "24h"))
	if code := d.exitCode(); code != 2 {
		t.Fatalf("a node with the old --recycle-after: exit %d, want 2; output:\n%s", code, d.Output())
	}
	for _, s := range []string{"uses --recycle-after 5m0s, this node is configured with 24h0m0s", "leave --recycle-after unset"} {
		if !strings.Contains(d.Output(), s) {
			t.Errorf("output lacks %q:\n%s", s, d.Output())
		}
	}
	code, out, errOut = ctl(t, "cluster", "list", "--zk", z)
	if code != 0 || !strings.Contains(out, "RECYCLE AFTER") || !strings.Contains(out, "5m0s") {
		t.Fatalf("cluster list: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
