package e2e

import (
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/node"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
	"codeberg.org/snowflaked/snowflaked/tests/zkproxy"
)

// retryCtl runs snowflakectl args until it exits 0, for at most within;
// each refusal must say want. It returns the successful run's stdout.
func retryCtl(t *testing.T, within time.Duration, want string, args ...string) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		code, out, errOut := ctl(t, args...)
		if code == 0 {
			return out
		}
		if !strings.Contains(errOut, want) {
			t.Fatalf("snowflakectl %s: exit %d: %s\nwant a refusal saying %q", strings.Join(args, " "), code, errOut, want)
		}
		if time.Now().After(deadline) {
			t.Fatalf("snowflakectl %s still refused after %s: %s", strings.Join(args, " "), within, errOut)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// A cluster deleted and created again under its name starts every worker
// ID after the deleted cluster's fence. Node A serves and stops cleanly;
// the cluster is deleted and created again (a later epoch is refused,
// naming the flag that accepts it); node B, a chaos build whose clock is
// 12 s behind, joins as worker 0 again. Every ID of B is later than every
// ID of A, so none is one of A's. On 713cbb1 B served at once, with IDs
// of the time A had served.
func TestIntegration_ClusterDeletedAndCreatedAgainStartsAfterItsFence(t *testing.T) {
	zk := zkharness.StartStandalone(t)
	const cluster = "tomb"
	extra := []string{"--zk-fence-ahead", "3s"}
	a := startNode(t, binSnowflaked, clusterArgs(t.TempDir(), zk.ConnectString(), cluster, "node-a", extra...))
	a.waitReadyz(http.StatusOK, readyTimeout)
	var fromA []int64
	for range 20 {
		fromA = append(fromA, a.ids(1000)...)
		time.Sleep(50 * time.Millisecond)
	}
	a.signal(syscall.SIGTERM)
	if code := a.exitCode(); code != 0 {
		t.Fatalf("A's clean stop: exit %d\n%s", code, a.Output())
	}

	retryCtl(t, 30*time.Second, "lease held", "cluster", "delete", cluster, "--yes", "--zk", zk.ConnectString())
	later := "2025-01-01T00:00:00Z"
	code, out, errOut := ctl(t, "cluster", "create", cluster, "--epoch", later, "--zk", zk.ConnectString())
	if code != 2 || !strings.Contains(errOut, "--ignore-tombstone") || !strings.Contains(errOut, "later") {
		t.Fatalf("cluster create over the tombstone with a later epoch: exit %d %s %s; want 2 naming the epoch and --ignore-tombstone", code, out, errOut)
	}
	code, out, errOut = ctl(t, "cluster", "list", "--zk", zk.ConnectString())
	if code != 0 || !strings.Contains(out, "Tombstones") || !strings.Contains(out, cluster) {
		t.Fatalf("cluster list: exit %d %s %s; want the tombstone of %s", code, out, errOut, cluster)
	}
	code, out, errOut = ctl(t, "cluster", "create", cluster, "--zk", zk.ConnectString())
	if code != 0 || !strings.Contains(out, "starts after its fence") {
		t.Fatalf("cluster create over the tombstone: exit %d %s %s; want it created, naming the fence", code, out, errOut)
	}

	b := startNode(t, binChaos, clusterArgs(t.TempDir(), zk.ConnectString(), cluster, "node-b", extra...), node.ChaosClockOffsetEnv+"=-12s")
	b.waitReadyz(http.StatusOK, readyTimeout)
	fromB := b.ids(1000)
	var lastA, firstB int64
	for _, id := range fromA {
		lastA = max(lastA, id)
	}
	firstB = fromB[0]
	for _, id := range fromB {
		firstB = min(firstB, id)
	}
	aMs, aWorker := decodeMs(lastA)
	bMs, bWorker := decodeMs(firstB)
	t.Logf("A: %d IDs up to %d ms (worker %d); B (clock 12s behind): first ID at %d ms (worker %d)", len(fromA), aMs, aWorker, bMs, bWorker)
	if bMs <= aMs {
		t.Errorf("B's first ID is of %d ms, not after A's last (%d ms): the deleted cluster's fence was forgotten", bMs, aMs)
	}
	checkIDs(t, fromA, fromB)
}

// A cluster with a segment tag is not deleted while a node holds ranges of
// it, and a tag created again in the cluster created again starts at the
// deleted tag's max_id. Node A serves tag t and is cut off from
// ZooKeeper; the delete is refused while A's holder record is there
// (naming A), passes once A's session is gone, and the cluster and tag are
// created again; node B serves the new t while A still serves the old
// ranges it holds. No number twice. Then the tag is deleted once more: a
// create with --start 1 is refused naming --reuse-numbers, one without
// --start starts above every number. On 713cbb1 the delete passed while A
// held ranges and B handed out A's numbers again.
func TestIntegration_ClusterDeletedUnderACutOffSegmentNode(t *testing.T) {
	zk := zkharness.StartStandalone(t)
	const cluster, tag = "tombseg", "t"
	px := zkproxy.Start(t, zk.ConnectString())
	a := startNode(t, binSnowflaked, clusterArgs(t.TempDir(), px.Addr(), cluster, "node-a", "--zk-fence-ahead", "3s"))
	if code, out, errOut := ctl(t, "segment", "create", tag, "--zk", zk.ConnectString(), "--cluster", cluster, "--step", "500"); code != 0 {
		t.Fatalf("segment create: %d %s %s", code, out, errOut)
	}
	(&segNode{p: a}).waitSegmentReady(t)
	book := &numberBook{t: t, seen: map[int64]string{}}
	book.add("A", segmentNumbers(t, a, tag, 20))

	waitHolder(t, zk.ConnectString(), "/snowflaked/"+cluster+"/segments/"+tag+"/holders")
	px.Block()
	code, _, errOut := ctl(t, "cluster", "delete", cluster, "--yes", "--zk", zk.ConnectString())
	if code == 0 || !strings.Contains(errOut, "hold dense-ID ranges") || !strings.Contains(errOut, "node-a") {
		t.Fatalf("cluster delete while node A held ranges of tag %s: exit %d %s; want a refusal naming A", tag, code, errOut)
	}
	retryCtl(t, 40*time.Second, "lease held", "cluster", "delete", cluster, "--yes", "--zk", zk.ConnectString())
	if code, out, errOut := ctl(t, "cluster", "create", cluster, "--zk", zk.ConnectString()); code != 0 {
		t.Fatalf("cluster create: %d %s %s", code, out, errOut)
	}
	code, out, errOut := ctl(t, "segment", "create", tag, "--zk", zk.ConnectString(), "--cluster", cluster, "--step", "500")
	if code != 0 || !strings.Contains(out, "starts there") {
		t.Fatalf("segment create over the tombstone: %d %s %s; want it created above the old max_id", code, out, errOut)
	}
	b := startNode(t, binSnowflaked, clusterArgs(t.TempDir(), zk.ConnectString(), cluster, "node-b"))
	(&segNode{p: b}).waitSegmentReady(t)
	for range 5 {
		book.add("A (cut off)", segmentNumbers(t, a, tag, 20))
		book.add("B", segmentNumbers(t, b, tag, 20))
	}

	b.signal(syscall.SIGTERM)
	if code := b.exitCode(); code != 0 {
		t.Fatalf("B's clean stop: exit %d\n%s", code, b.Output())
	}
	if code, out, errOut := ctl(t, "segment", "delete", tag, "--yes", "--zk", zk.ConnectString(), "--cluster", cluster); code != 0 {
		t.Fatalf("segment delete: %d %s %s", code, out, errOut)
	}
	code, out, errOut = ctl(t, "segment", "create", tag, "--zk", zk.ConnectString(), "--cluster", cluster, "--start", "1")
	if code != 2 || !strings.Contains(errOut, "--reuse-numbers") || !strings.Contains(errOut, "max_id") {
		t.Fatalf("segment create --start 1 over the tombstone: %d %s %s; want exit 2 naming max_id and --reuse-numbers", code, out, errOut)
	}
	if code, out, errOut := ctl(t, "segment", "create", tag, "--zk", zk.ConnectString(), "--cluster", cluster); code != 0 {
		t.Fatalf("segment create without --start: %d %s %s", code, out, errOut)
	}
	c := startNode(t, binSnowflaked, clusterArgs(t.TempDir(), zk.ConnectString(), cluster, "node-c"))
	(&segNode{p: c}).waitSegmentReady(t)
	book.add("C", segmentNumbers(t, c, tag, 50))
	book.add("A (cut off)", segmentNumbers(t, a, tag, 20))
	if book.twice > 0 {
		t.Fatalf("%d numbers handed out twice", book.twice)
	}
}

// waitHolder waits until the holders znode dir has a child: a node's
// record of the ranges it holds.
func waitHolder(t *testing.T, servers, dir string) {
	t.Helper()
	conn := rawZK(t, servers)
	deadline := time.Now().Add(readyTimeout)
	for {
		kids, _, err := conn.Children(dir)
		if err == nil && len(kids) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no holder record under %s within %s: %v %v", dir, readyTimeout, kids, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
