package e2e

import (
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
	"codeberg.org/snowflaked/snowflaked/tests/zkproxy"
)

// fenceAhead is --zk-fence-ahead in the fencing tests: short, so a cut-off
// node runs out within the test, and six report intervals.
const fenceAhead = 3 * time.Second

// lastMs is the largest timestamp (unix ms) among ids, 0 for none.
func lastMs(ids []int64) int64 {
	var m int64
	for _, id := range ids {
		ms, _ := decodeMs(id)
		m = max(m, ms)
	}
	return m
}

// The partition scenario: node A (node key k) is cut off from a ZooKeeper
// that keeps running; once its session expired, a second process with node
// key k starts elsewhere (another disk) with ZooKeeper reachable. Both are
// under load the whole time. Before the fence, both served and 15% of the
// IDs were duplicates; now A stops at the fence ZooKeeper acknowledged
// (within G of the cut) and B starts after it: no duplicate.
func TestIntegration_ClusterPartitionedNodeFencedOutBySameKey(t *testing.T) {
	zk := zkharness.StartStandalone(t)
	proxy := zkproxy.Start(t, zk.ConnectString())
	extra := []string{"--zk-fence-ahead", fenceAhead.String()}
	a := startNode(t, binSnowflaked, clusterArgs(t.TempDir(), proxy.Addr(), "fence", "k", extra...))
	a.waitReadyz(http.StatusOK, readyTimeout)
	ca := collectPath(a.addr, "/ids?count=100", time.Millisecond)
	ca.waitFor(t, 1000)

	cutAt := time.Now()
	proxy.Block()
	waitRow(t, zk, "fence", "k", readyTimeout, func(r coordinator.WorkerInfo) bool { return !r.LeaseHeld })
	expiredAfter := time.Since(cutAt)
	b := startNode(t, binSnowflaked, clusterArgs(t.TempDir(), zk.ConnectString(), "fence", "k", extra...))
	b.waitReadyz(http.StatusOK, readyTimeout)
	bReadyAfter := time.Since(cutAt)
	cb := collectPath(b.addr, "/ids?count=100", time.Millisecond)
	cb.waitFor(t, 1000)
	// Keep both under load until well past A's fence.
	for time.Since(cutAt) < fenceAhead+4*time.Second {
		time.Sleep(50 * time.Millisecond)
	}
	aIDs, bIDs := ca.finish(t), cb.finish(t)
	n := checkIDs(t, aIDs, bIDs)
	if workerOf(t, aIDs) != workerOf(t, bIDs) {
		t.Fatalf("A had worker %d, B %d: the scenario needs the same worker ID", workerOf(t, aIDs), workerOf(t, bIDs))
	}
	aLast, bFirst := lastMs(aIDs), slices.Min(bIDs)
	bFirstMs, _ := decodeMs(bFirst)
	// A's last renewal was at most a report interval before the cut.
	if limit := cutAt.UnixMilli() + fenceAhead.Milliseconds(); aLast > limit {
		t.Errorf("A issued an ID at %d, %dms past the cut: beyond G %s", aLast, aLast-cutAt.UnixMilli(), fenceAhead)
	}
	if bFirstMs <= aLast {
		t.Errorf("B's first ID at %d is not after A's last at %d", bFirstMs, aLast)
	}
	if code, body := a.get("/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("A in service after it was fenced out: %d %s", code, body)
	}
	if code, body := a.get("/id"); code != http.StatusServiceUnavailable {
		t.Errorf("A still answers /id: %d %s", code, body)
	}
	t.Logf("A cut off; its session expired after %s; B in service %s after the cut; A's last ID %dms after the cut "+
		"(G %s); B's first ID %dms after A's last; %d IDs checked (A %d, B %d), no duplicate; A's 503s %v",
		expiredAfter.Round(time.Millisecond), bReadyAfter.Round(time.Millisecond), aLast-cutAt.UnixMilli(), fenceAhead,
		bFirstMs-aLast, n, len(aIDs), len(bIDs), ca.statuses)
}

// A node frozen (SIGSTOP) for longer than its session while another node
// recycles its worker ID resumes (SIGCONT) with requests queued: whatever it
// answers stays below the recycler's start, and it leaves service.
func TestIntegration_ClusterFrozenNodeRecycledMeanwhile(t *testing.T) {
	zk := zkharness.StartStandalone(t)
	// Two worker IDs only, so a third node key recycles one; a short
	// recycle-after so it is free soon after the freeze.
	extra := []string{"--layout", "41/1/21", "--recycle-after", "1s", "--zk-fence-ahead", fenceAhead.String()}
	a := startNode(t, binSnowflaked, clusterArgs(t.TempDir(), zk.ConnectString(), "frozen", "a", extra...))
	a.waitReadyz(http.StatusOK, readyTimeout)
	x := startNode(t, binSnowflaked, clusterArgs(t.TempDir(), zk.ConnectString(), "frozen", "x", extra...))
	x.waitReadyz(http.StatusOK, readyTimeout)
	ca := collectPath(a.addr, "/ids?count=100", time.Millisecond)
	ca.waitFor(t, 1000)
	aWorker := workerRows(t, zk, "frozen")["a"].WorkerID

	a.signal(syscall.SIGSTOP)
	stoppedAt := time.Now()
	waitRow(t, zk, "frozen", "a", readyTimeout, func(r coordinator.WorkerInfo) bool { return !r.LeaseHeld })
	c := startNode(t, binSnowflaked, clusterArgs(t.TempDir(), zk.ConnectString(), "frozen", "c", extra...))
	c.waitReadyz(http.StatusOK, readyTimeout)
	cc := collectPath(c.addr, "/ids?count=100", time.Millisecond)
	cc.waitFor(t, 1000)
	if r := workerRows(t, zk, "frozen")["c"]; r.WorkerID != aWorker {
		t.Fatalf("c got worker %d, want a's recycled %d (rows %+v)", r.WorkerID, aWorker, workerRows(t, zk, "frozen"))
	}
	a.signal(syscall.SIGCONT)
	resumedAt := time.Now()
	a.waitReadyz(http.StatusServiceUnavailable, readyTimeout)
	for time.Since(resumedAt) < time.Second { // A's queued and new requests meet the fence
		time.Sleep(50 * time.Millisecond)
	}
	aIDs, cIDs := ca.finish(t), cc.finish(t)
	n := checkIDs(t, aIDs, cIDs)
	aLast := lastMs(aIDs)
	cFirst, _ := decodeMs(slices.Min(cIDs))
	if cFirst <= aLast {
		t.Errorf("c's first ID at %d is not after a's last at %d", cFirst, aLast)
	}
	_, body := a.get("/readyz")
	t.Logf("a frozen %s; c recycled worker %d; a's last ID %dms after the freeze; c's first %dms after a's last; %d IDs checked, no duplicate; a now: %s",
		resumedAt.Sub(stoppedAt).Round(time.Millisecond), aWorker, aLast-stoppedAt.UnixMilli(), cFirst-aLast, n, body)
}

// The settings every node must share live in the cluster znode: a node
// with another --recycle-after is refused (exit 2) naming both values.
func TestIntegration_ClusterMixedRecycleAfterRefused(t *testing.T) {
	zk := zkharness.StartStandalone(t)
	a := startNode(t, binSnowflaked, clusterArgs(t.TempDir(), zk.ConnectString(), "mixed", "a", "--recycle-after", "24h"))
	a.waitReadyz(http.StatusOK, readyTimeout)
	b := start(t, binSnowflaked, clusterArgs(t.TempDir(), zk.ConnectString(), "mixed", "b", "--recycle-after", "5m"))
	if code := b.exitCode(); code != 2 {
		t.Fatalf("exit %d, want 2; output:\n%s", code, b.Output())
	}
	for _, s := range []string{"--recycle-after 24h0m0s", "configured with 5m0s"} {
		if !strings.Contains(b.Output(), s) {
			t.Errorf("output lacks %q:\n%s", s, b.Output())
		}
	}
}

// A node whose cache file belongs to another incarnation of the cluster
// (ZooKeeper lost its data, or --zk points elsewhere) refuses to start
// (exit 2) naming both; with --accept-new-incarnation it starts after its
// cache file's fence, so it reissues nothing it issued before.
func TestIntegration_ClusterZooKeeperWithLostDataRefusedUnlessAccepted(t *testing.T) {
	old := zkharness.StartStandalone(t)
	dir := t.TempDir()
	p := startNode(t, binSnowflaked, clusterArgs(dir, old.ConnectString(), "wiped", "n"))
	p.waitReadyz(http.StatusOK, readyTimeout)
	before := p.ids(5000)
	p.signal(syscall.SIGKILL)
	p.exitCode()

	fresh := zkharness.StartStandalone(t) // the rebuilt ensemble: no data
	refused := start(t, binSnowflaked, clusterArgs(dir, fresh.ConnectString(), "wiped", "n"))
	if code := refused.exitCode(); code != 2 {
		t.Fatalf("exit %d, want 2; output:\n%s", code, refused.Output())
	}
	for _, s := range []string{"another ensemble", "--accept-new-incarnation", "incarnation"} {
		if !strings.Contains(refused.Output(), s) {
			t.Errorf("output lacks %q:\n%s", s, refused.Output())
		}
	}
	accepted := startNode(t, binSnowflaked, clusterArgs(dir, fresh.ConnectString(), "wiped", "n", "--accept-new-incarnation"))
	accepted.waitReadyz(http.StatusOK, readyTimeout)
	after := accepted.ids(5000)
	checkIDs(t, before, after)
	if slices.Min(after) <= slices.Max(before) && workerOf(t, after) == workerOf(t, before) {
		t.Errorf("after accepting the new incarnation: first ID %d not after the last before %d", slices.Min(after), slices.Max(before))
	}
}
