package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sfctl "codeberg.org/snowflaked/snowflaked/internal/ctl"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
	"codeberg.org/snowflaked/snowflaked/tests/zkproxy"
)

// segNode is one node under load; its goroutines pause (mu held for
// writing) while it restarts.
type segNode struct {
	mu   sync.RWMutex
	p    *proc
	old  []*proc // earlier processes, for their logs
	args []string
	bin  string
	gen  int
}

func (n *segNode) waitSegmentReady(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(readyTimeout)
	for {
		code, body := n.p.get("/readyz/segment")
		if code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz/segment still %d %s", code, body)
		}
		time.Sleep(pollEvery)
	}
}

// restart stops the node (SIGTERM or SIGKILL) and starts it again on the
// same disk; the load on it pauses meanwhile, and before runs first, with
// no request in flight.
func (n *segNode) restart(t *testing.T, sig syscall.Signal, before func()) {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if before != nil {
		before()
	}
	n.p.signal(sig)
	code := n.p.exitCode()
	if sig == syscall.SIGTERM && code != 0 {
		t.Fatalf("SIGTERM: exit %d; stderr:\n%s", code, n.p.Output())
	}
	n.old = append(n.old, n.p)
	n.p = startNode(t, n.bin, n.args)
	n.waitSegmentReady(t)
	n.gen++
}

// segmentLogs are the segment lines of every process of the nodes.
func segmentLogs(nodes []*segNode) string {
	var b strings.Builder
	for i, n := range nodes {
		for _, p := range append(n.old, n.p) {
			for _, line := range strings.Split(p.Output(), "\n") {
				if strings.Contains(line, "segment") || strings.Contains(line, "stopp") || strings.Contains(line, `"warn"`) && !strings.Contains(line, `"peers"`) {
					fmt.Fprintf(&b, "node %d: %s\n", i, line)
				}
			}
		}
	}
	return b.String()
}

// segmentTally reads the tag's accounting from ZooKeeper.
func segmentTally(t *testing.T, zk string, cluster string) sfctl.SegmentStatus {
	t.Helper()
	code, out, errOut := ctl(t, "segment", "status", "orders", "--zk", zk, "--cluster", cluster, "--json")
	if code != 0 {
		t.Fatalf("segment status: %d %s", code, errOut)
	}
	var r sfctl.SegmentStatus
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("segment status %q: %v", out, err)
	}
	if r.ReturnedIDs+r.HeldIDs+r.IssuedOrLost != r.HandedOut || r.IssuedOrLostAtMost != r.IssuedOrLost+r.HeldIDs || r.IssuedOrLost < 0 || r.OutsideIDs != 0 {
		t.Fatalf("segment status's figures do not add up: handed out %d, returned %d, held %d, issued or lost %d to %d, outside %d",
			r.HandedOut, r.ReturnedIDs, r.HeldIDs, r.IssuedOrLost, r.IssuedOrLostAtMost, r.OutsideIDs)
	}
	return r
}

// Three real nodes serve one tag under load. Phase 1: every node is
// restarted with SIGTERM (one is also rolled back 5s by its chaos clock:
// out of service for snowflake IDs, still serving dense ones); then all
// stop cleanly: not one ID is missing from the dense sequence. Phase 2: two
// kill -9 restarts; the IDs lost are exactly what the nodes' metrics said
// a kill would lose (their mark's lead). No ID twice, each node's IDs
// increase.
func TestIntegration_SegmentsCleanAndCrashRestarts(t *testing.T) {
	zk := zkharness.StartStandalone(t)
	const cluster = "segments"
	nodes := make([]*segNode, 3)
	for i := range nodes {
		args := clusterArgs(t.TempDir(), zk.ConnectString(), cluster, fmt.Sprintf("node-%d", i))
		nodes[i] = &segNode{args: args, bin: binChaos}
		nodes[i].p = startNode(t, binChaos, args)
	}
	if code, out, errOut := ctl(t, "segment", "create", "orders", "--zk", zk.ConnectString(), "--cluster", cluster, "--start", "1", "--step", "200"); code != 0 {
		t.Fatalf("segment create: %d %s %s", code, out, errOut)
	}
	for _, n := range nodes {
		n.waitSegmentReady(t)
	}
	l := &segmentLoad{nodes: nodes, seen: map[int64]int{}}
	segmentsCleanRestarts(t, l, zk.ConnectString(), cluster)
	segmentsCrashRestarts(t, l, zk.ConnectString(), cluster)
}

// segmentsCleanRestarts is phase 1 of
// TestIntegration_SegmentsCleanAndCrashRestarts: under load, node 0's
// clock rolls back 5s (it still serves dense IDs), nodes 1, 2, 1 restart
// with SIGTERM, then all stop cleanly: every ID handed out and not
// returned was issued.
func segmentsCleanRestarts(t *testing.T, l *segmentLoad, zk, cluster string) {
	t.Helper()
	nodes := l.nodes
	l.start(t)
	time.Sleep(300 * time.Millisecond)
	if code, body := nodes[0].p.do(http.MethodPost, "/debug/chaos/clock?offset=-5s"); code != http.StatusOK {
		t.Fatalf("roll back node 0: %d %s", code, body)
	}
	nodes[0].p.waitReadyz(http.StatusServiceUnavailable, readyTimeout)
	code, body := nodes[0].p.get("/segment/orders")
	if code != http.StatusOK {
		t.Fatalf("node 0 out of service for its clock refuses dense IDs: %d %s", code, body)
	}
	l.record(parseIDs(t, body))
	for _, i := range []int{1, 2, 1} {
		time.Sleep(200 * time.Millisecond)
		nodes[i].restart(t, syscall.SIGTERM, nil)
	}
	l.stopAll(t)
	r1 := segmentTally(t, zk, cluster)
	n1 := l.issued()
	t.Logf("phase 1 (3 clean restarts + all stopped): %d IDs issued, %d handed out, %d returned, %d held, lost %d",
		n1, r1.HandedOut, r1.ReturnedIDs, r1.HeldIDs, r1.HandedOut-r1.ReturnedIDs-n1)
	if r1.HandedOut-r1.ReturnedIDs != n1 || r1.HeldIDs != 0 {
		t.Fatalf("after clean restarts: handed out %d - returned %d != issued %d (held %d): a clean stop wasted IDs; logs:\n%s", r1.HandedOut, r1.ReturnedIDs, n1, r1.HeldIDs, segmentLogs(nodes))
	}
}

// segmentsCrashRestarts is phase 2 of
// TestIntegration_SegmentsCleanAndCrashRestarts: the stopped nodes start
// again, and under load nodes 2 and 0 restart after kill -9: the IDs lost
// are exactly their marks' lead before the kills, and no ID came twice.
func segmentsCrashRestarts(t *testing.T, l *segmentLoad, zk, cluster string) {
	t.Helper()
	nodes := l.nodes
	for _, n := range nodes {
		n.old = append(n.old, n.p)
		n.p = startNode(t, n.bin, n.args)
		n.waitSegmentReady(t)
		n.gen++
	}
	l.start(t)
	var expectLost int64
	for _, i := range []int{2, 0} {
		time.Sleep(300 * time.Millisecond)
		n := nodes[i]
		n.restart(t, syscall.SIGKILL, func() {
			// The load is paused: let a state write in flight land, then
			// read what the kill will lose.
			time.Sleep(100 * time.Millisecond)
			expectLost += int64(metricValue(t, n.p, `snowflaked_segment_mark_ahead{tag="orders"}`))
		})
	}
	time.Sleep(300 * time.Millisecond)
	l.stopAll(t)
	r2 := segmentTally(t, zk, cluster)
	n2 := l.issued()
	lost := r2.HandedOut - r2.ReturnedIDs - n2
	lo, hi := l.span()
	t.Logf("phase 2 (2 kill -9 restarts): %d IDs issued in all over [%d,%d] (dense-ness %.4f), %d handed out, %d returned; lost %d, the nodes' mark lead before the kills %d",
		n2, lo, hi, float64(n2)/float64(hi-lo+1), r2.HandedOut, r2.ReturnedIDs, lost, expectLost)
	if dups := l.duplicates(); dups != 0 {
		t.Fatalf("%d IDs issued twice", dups)
	}
	if lost != expectLost {
		t.Fatalf("lost %d IDs over two kill -9, want exactly the mark lead %d", lost, expectLost)
	}
}

// segmentLoad is dense-ID load on segNodes: three goroutines per node ask
// for IDs of tag orders, each checking that its node's IDs increase, and
// every ID issued is counted (and every one issued twice).
type segmentLoad struct {
	nodes []*segNode
	wg    sync.WaitGroup
	stop  chan struct{}

	mu   sync.Mutex
	seen map[int64]int
	dups int
}

// start puts the load on every node until stopAll.
func (l *segmentLoad) start(t *testing.T) {
	t.Helper()
	l.stop = make(chan struct{})
	stop := l.stop
	for i, n := range l.nodes {
		for g := range 3 {
			l.wg.Go(func() { l.ask(t, i, g, n, stop) })
		}
	}
}

// ask is one goroutine of the load on node i: it asks n for 1 to 20 IDs
// at a time until stop closes, and checks that they come in increasing
// order within one process of the node.
func (l *segmentLoad) ask(t *testing.T, i, g int, n *segNode, stop <-chan struct{}) {
	t.Helper()
	var last int64
	gen := -1
	for k := 0; ; k++ {
		select {
		case <-stop:
			return
		default:
		}
		n.mu.RLock()
		if n.gen != gen {
			gen, last = n.gen, 0
		}
		code, body := n.p.get("/segment/orders?count=" + strconv.Itoa(1+k%20))
		n.mu.RUnlock()
		if code != http.StatusOK {
			t.Errorf("node %d: /segment/orders: %d %s", i, code, body)
			return
		}
		ids := parseIDs(t, body)
		if len(ids) > 0 && ids[0] <= last {
			t.Errorf("node %d goroutine %d: %d after %d", i, g, ids[0], last)
		}
		last = ids[len(ids)-1]
		l.record(ids)
		time.Sleep(2 * time.Millisecond) // paced: other tests share the machine
	}
}

// record counts ids as issued.
func (l *segmentLoad) record(ids []int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range ids {
		if l.seen[id]++; l.seen[id] == 2 {
			l.dups++
		}
	}
}

// issued is how many distinct IDs the load got.
func (l *segmentLoad) issued() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int64(len(l.seen))
}

// duplicates is how many IDs the load got more than once.
func (l *segmentLoad) duplicates() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dups
}

// span is the lowest and highest ID the load got.
func (l *segmentLoad) span() (lo, hi int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lo, hi = 1<<62, 0
	for id := range l.seen {
		lo, hi = min(lo, id), max(hi, id)
	}
	return lo, hi
}

// stopAll stops the load, then every node with SIGTERM, each of which
// must exit 0.
func (l *segmentLoad) stopAll(t *testing.T) {
	t.Helper()
	close(l.stop)
	l.wg.Wait()
	for _, n := range l.nodes {
		n.p.signal(syscall.SIGTERM)
		if code := n.p.exitCode(); code != 0 {
			t.Fatalf("SIGTERM: exit %d; stderr:\n%s", code, n.p.Output())
		}
	}
}

// metricValue reads one sample from /metrics.
func metricValue(t *testing.T, p *proc, series string) float64 {
	t.Helper()
	code, body := p.get("/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: %q", series, line)
			}
			return f
		}
	}
	t.Fatalf("/metrics has no %s", series)
	return 0
}

// A node killed with -9 restarts while ZooKeeper is down: from its cache
// file (worker ID) and its segment state file it serves the dense IDs its
// predecessor held, above every ID issued before; a SIGTERM while ZooKeeper
// is still down keeps the ranges on disk (nothing can be returned), and the
// next start, with ZooKeeper back, resumes them again and returns the rest
// on its clean stop: no ID twice, no range lost beyond the crash's mark.
func TestIntegration_SegmentsResumeWhileZooKeeperIsDown(t *testing.T) {
	zk := zkharness.StartStandalone(t)
	const cluster = "segdown"
	args := clusterArgs(t.TempDir(), zk.ConnectString(), cluster, "node-z")
	p := startNode(t, binSnowflaked, args)
	if code, out, errOut := ctl(t, "segment", "create", "orders", "--zk", zk.ConnectString(), "--cluster", cluster, "--step", "1000"); code != 0 {
		t.Fatalf("segment create: %d %s %s", code, out, errOut)
	}
	n := &segNode{p: p}
	n.waitSegmentReady(t)
	fetch := func(p *proc, count int) []int64 {
		t.Helper()
		code, body := p.get("/segment/orders?count=" + strconv.Itoa(count))
		if code != http.StatusOK {
			t.Fatalf("/segment/orders?count=%d: %d %s", count, code, body)
		}
		return parseIDs(t, body)
	}
	var all []int64
	all = append(all, fetch(p, 300)...)
	p.signal(syscall.SIGKILL)
	p.exitCode()
	if err := zk.StopAll(); err != nil {
		t.Fatal(err)
	}

	q := startNode(t, binSnowflaked, args)
	resumed := fetch(q, 200)
	if resumed[0] <= all[len(all)-1] {
		t.Fatalf("first ID after the restart %d, not above the last before the crash %d", resumed[0], all[len(all)-1])
	}
	all = append(all, resumed...)
	if code, _ := q.get("/readyz/segment"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz/segment without ZooKeeper: %d, want 503", code)
	}
	q.signal(syscall.SIGTERM)
	q.exitCode()
	if !strings.Contains(q.Output(), "its ranges stay in the state file for the next start") {
		t.Errorf("the stop without ZooKeeper did not keep the ranges on disk:\n%s", q.Output())
	}

	if err := zk.StartAll(); err != nil {
		t.Fatal(err)
	}
	r := startNode(t, binSnowflaked, args)
	again := fetch(r, 200)
	if again[0] <= resumed[len(resumed)-1] || again[0] > resumed[len(resumed)-1]+1 {
		t.Fatalf("after the stop without ZooKeeper: first ID %d, want %d (the very next: nothing lost, nothing reissued)", again[0], resumed[len(resumed)-1]+1)
	}
	all = append(all, again...)
	(&segNode{p: r}).waitSegmentReady(t)
	r.signal(syscall.SIGTERM)
	if code := r.exitCode(); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
	seen := map[int64]bool{}
	for _, id := range all {
		if seen[id] {
			t.Fatalf("ID %d issued twice", id)
		}
		seen[id] = true
	}
	rep := segmentTally(t, zk.ConnectString(), cluster)
	lost := rep.HandedOut - rep.ReturnedIDs - int64(len(all))
	t.Logf("%d IDs over a kill -9, a restart and a stop without ZooKeeper, and a clean restart: handed out %d, returned %d, lost %d (the crash's mark lead)", len(all), rep.HandedOut, rep.ReturnedIDs, lost)
	if lost < 0 || lost > 100 {
		t.Fatalf("lost %d IDs, want at most one chunk (step 1000 / 10)", lost)
	}
}

// Three real nodes, one tag (step 1000). Node A issued 5 IDs of its range
// and stops cleanly; its return of the rest reaches ZooKeeper and is
// applied, but the answer is lost and A cannot reach ZooKeeper for 5s.
// Meanwhile node B starts and takes the lowest returned range: A's. A
// comes back and must not put that range back (it tells from the nonce
// its return wrote that it happened). Then node C starts: it must get a
// range of its own, not A's again. No dense ID twice, and after the final
// clean stops no returned range holds an issued ID.
func TestIntegration_SegmentsLostReturnAnswerIsNotReturnedTwice(t *testing.T) {
	zk := zkharness.StartStandalone(t)
	const cluster = "lostreturn"
	px := zkproxy.Start(t, zk.ConnectString())
	aArgs := clusterArgs(t.TempDir(), px.Addr(), cluster, "node-a", "--shutdown-timeout", "30s")
	a := startNode(t, binSnowflaked, aArgs)
	if code, out, errOut := ctl(t, "segment", "create", "orders", "--zk", zk.ConnectString(), "--cluster", cluster, "--start", "1", "--step", "1000"); code != 0 {
		t.Fatalf("segment create: %d %s %s", code, out, errOut)
	}
	(&segNode{p: a}).waitSegmentReady(t)
	fetch := func(p *proc, count int) []int64 {
		t.Helper()
		code, body := p.get("/segment/orders?count=" + strconv.Itoa(count))
		if code != http.StatusOK {
			t.Fatalf("/segment/orders?count=%d: %d %s", count, code, body)
		}
		return parseIDs(t, body)
	}
	issued := map[int64]string{}
	keep := func(who string, ids []int64) {
		t.Helper()
		for _, id := range ids {
			if by, dup := issued[id]; dup {
				t.Fatalf("dense ID %d issued twice: by %s and by %s", id, by, who)
			}
			issued[id] = who
		}
	}
	keep("A", fetch(a, 5))

	// A's return goes through; its answer is lost and A is cut off for 5s.
	px.LoseAnswerTo("/returned/", func() {
		px.Block()
		time.AfterFunc(5*time.Second, px.Unblock)
	})
	a.signal(syscall.SIGTERM)
	deadline := time.Now().Add(readyTimeout)
	for !px.Lost() {
		if time.Now().After(deadline) {
			t.Fatalf("A's return never went out:\n%s", a.Output())
		}
		time.Sleep(pollEvery)
	}

	b := startNode(t, binSnowflaked, clusterArgs(t.TempDir(), zk.ConnectString(), cluster, "node-b"))
	(&segNode{p: b}).waitSegmentReady(t)
	fromB := fetch(b, 50)
	if fromB[0] != 6 {
		t.Fatalf("B's first ID %d, want 6: B did not take A's returned range while A was cut off", fromB[0])
	}
	keep("B", fromB)

	if code := a.exitCode(); code != 0 {
		t.Fatalf("A's clean stop: exit %d\n%s", code, a.Output())
	}
	c := startNode(t, binSnowflaked, clusterArgs(t.TempDir(), zk.ConnectString(), cluster, "node-c"))
	(&segNode{p: c}).waitSegmentReady(t)
	keep("C", fetch(c, 50))
	keep("B", fetch(b, 50))

	for _, p := range []*proc{b, c} {
		p.signal(syscall.SIGTERM)
		if code := p.exitCode(); code != 0 {
			t.Fatalf("SIGTERM: exit %d\n%s", code, p.Output())
		}
	}
	rep := segmentTally(t, zk.ConnectString(), cluster)
	for _, r := range rep.Returned {
		for id := r.Lo; id < r.Hi; id++ {
			if by, ok := issued[id]; ok {
				t.Fatalf("returned range %v holds ID %d, issued by %s: it would be handed out twice", r, id, by)
			}
		}
	}
	t.Logf("A's answer lost, B took its range, C got its own: %d IDs, none twice; returned now %v", len(issued), rep.Returned)
}

// Deleting the lock file under a node that serves dense IDs: a second
// process on the same cache file resumes the segment state file, but the
// first writes no mark once its lock is gone, so it issues only below the
// mark the second resumes after. No dense ID twice.
func TestIntegration_DeletedLockFileServesNoDenseIDTwice(t *testing.T) {
	zk := zkharness.StartStandalone(t)
	const cluster = "seglock"
	dir := t.TempDir()
	args := clusterArgs(dir, zk.ConnectString(), cluster, "node-x")
	a := startNode(t, binSnowflaked, args)
	if code, out, errOut := ctl(t, "segment", "create", "orders", "--zk", zk.ConnectString(), "--cluster", cluster, "--step", "1000"); code != 0 {
		t.Fatalf("segment create: %d %s %s", code, out, errOut)
	}
	(&segNode{p: a}).waitSegmentReady(t)
	issued := map[int64]string{}
	keep := func(who string, p *proc) bool {
		t.Helper()
		code, body := p.get("/segment/orders?count=20")
		if code != http.StatusOK {
			return false
		}
		for _, id := range parseIDs(t, body) {
			if by, dup := issued[id]; dup {
				t.Fatalf("dense ID %d issued twice: by %s and by %s", id, by, who)
			}
			issued[id] = who
		}
		return true
	}
	for range 5 {
		keep("A", a)
	}
	if err := os.Remove(filepath.Join(dir, "cache.json.lock")); err != nil {
		t.Fatal(err)
	}
	b := startNode(t, binSnowflaked, args)
	(&segNode{p: b}).waitSegmentReady(t)
	servedB, aServes := 0, true
	for range 60 {
		if aServes {
			aServes = keep("A", a) // A stops at the mark it wrote while it held the lock
		}
		if keep("B", b) {
			servedB++
		}
	}
	if servedB == 0 {
		t.Fatal("B never served: the test did not run two processes on one cache file")
	}
	t.Logf("%d dense IDs from A and B on one cache file, none twice", len(issued))
}
