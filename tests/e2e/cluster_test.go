package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/internal/cachefile"
	"codeberg.org/snowflaked/snowflaked/snowflake"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
	"codeberg.org/snowflaked/snowflaked/tests/zkproxy"
)

// Short timings keep the ZooKeeper-mode tests fast.
const (
	zkSession      = 2 * time.Second
	reportInterval = 500 * time.Millisecond
	clusterFence   = time.Second // --fence-ahead
	// staleLeaseWait is the coordinator's bound on waiting for a dead
	// session's lease: session timeout + max(timeout/2, 1s).
	staleLeaseWait = zkSession + time.Second
)

// clusterArgs are the flags of a ZooKeeper-mode node: loopback, a free port,
// the cache file in dir, JSON logs and short timings. Every test node may
// create its cluster (--create-cluster): the tests start on a fresh
// ZooKeeper; the typo test starts its node without it.
func clusterArgs(dir, zk, cluster, nodeKey string, extra ...string) []string {
	args := []string{
		"--listen", "127.0.0.1:0", "--cache-file", filepath.Join(dir, "cache.json"), "--log-format", "json",
		"--zk", zk, "--cluster", cluster, "--node-key", nodeKey, "--create-cluster",
		"--zk-session-timeout", zkSession.String(), "--report-interval", reportInterval.String(),
		"--fence-ahead", clusterFence.String(), "--peer-interval", "1s",
	}
	return append(args, extra...)
}

// workerRows reads the cluster's table from ZooKeeper, by node key.
func workerRows(t *testing.T, zk *zkharness.Cluster, cluster string) map[string]coordinator.WorkerInfo {
	t.Helper()
	adm, err := coordinator.NewAdmin(strings.Split(zk.ConnectString(), ","), "", 10*time.Second)
	if err != nil {
		t.Fatalf("NewAdmin: %v", err)
	}
	defer adm.Close()
	rows, err := adm.ListWorkers(context.Background(), cluster)
	if err != nil {
		t.Fatalf("ListWorkers: %v", err)
	}
	out := map[string]coordinator.WorkerInfo{}
	for _, r := range rows {
		out[r.NodeKey] = r
	}
	return out
}

// waitRow polls ZooKeeper until cond holds for nodeKey's row.
func waitRow(t *testing.T, zk *zkharness.Cluster, cluster, nodeKey string, timeout time.Duration, cond func(coordinator.WorkerInfo) bool) coordinator.WorkerInfo {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		r, ok := workerRows(t, zk, cluster)[nodeKey]
		if ok && cond(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("row of node key %q: condition not met within %s (last %+v)", nodeKey, timeout, r)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// clockReport is the part of GET /clock these tests read.
type clockReport struct {
	WorkerID     int64  `json:"worker_id"`
	State        string `json:"state"`
	Reason       string `json:"reason"`
	LastIssuedMs int64  `json:"last_issued_ms"`
	FenceMs      int64  `json:"fence_ms"`
	// Failing maps each failing check to its detail.
	Failing map[string]string `json:"failing"`
	Peers   *struct {
		Reachable int  `json:"reachable"`
		Split     bool `json:"split"`
		Agree     int  `json:"agree"`
		Disagree  int  `json:"disagree"`
		Peers     []struct {
			WorkerID int64  `json:"worker_id"`
			Addr     string `json:"addr"`
			Error    string `json:"error"`
		} `json:"peers"`
	} `json:"peers"`
	ZK *struct {
		NodeKey         string `json:"node_key"`
		WorkerID        int64  `json:"worker_id"`
		Connected       bool   `json:"connected"`
		SessionState    string `json:"session_state"`
		LeaseHeld       bool   `json:"lease_held"`
		FromCache       bool   `json:"from_cache"`
		LastReportAgeMs int64  `json:"last_report_age_ms"`
		ZKFence         int64  `json:"zk_fence_ms"`
	} `json:"zk"`
}

func (p *proc) clock() clockReport {
	p.t.Helper()
	rep, code, body := p.tryClock()
	if code != http.StatusOK {
		p.t.Fatalf("/clock: %d %s", code, body)
	}
	return rep
}

// tryClock reads /clock; code is 0 when the answer was 200 but no report.
func (p *proc) tryClock() (clockReport, int, string) {
	p.t.Helper()
	code, body := p.get("/clock")
	var rep clockReport
	if code == http.StatusOK && (json.Unmarshal([]byte(body), &rep) != nil || rep.ZK == nil) {
		code = 0
	}
	return rep, code, body
}

// waitClock polls /clock until cond holds. A node still in its start
// phase (the port answers before the node's server takes it over) answers
// 503 starting: it is asked again, as for a condition not yet met.
func (p *proc) waitClock(timeout time.Duration, cond func(clockReport) bool) clockReport {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		rep, code, body := p.tryClock()
		switch {
		case code == http.StatusOK && cond(rep):
			return rep
		case code != http.StatusOK && !(code == http.StatusServiceUnavailable && strings.Contains(body, `"reason":"starting"`)):
			p.t.Fatalf("/clock: %d %s", code, body)
		case time.Now().After(deadline):
			p.t.Fatalf("/clock: condition not met within %s (last %d %s)", timeout, code, body)
		}
		time.Sleep(pollEvery)
	}
}

// workerOf returns the one worker ID of ids (failing if they mix workers).
func workerOf(t *testing.T, ids []int64) int64 {
	t.Helper()
	_, w := decodeMs(ids[0])
	for _, id := range ids {
		if _, wi := decodeMs(id); wi != w {
			t.Fatalf("IDs of one node carry workers %d and %d", w, wi)
		}
	}
	return w
}

// checkIDs is the checker: no ID twice across all lists, and within each
// list (IDs received one request at a time from one node) every worker's
// IDs strictly increase. It returns the number of IDs.
func checkIDs(t *testing.T, lists ...[]int64) int {
	t.Helper()
	seen := map[int64]bool{}
	n := 0
	for i, l := range lists {
		last := map[int64]int64{}
		for _, id := range l {
			if seen[id] {
				ms, w := decodeMs(id)
				t.Fatalf("duplicate ID %d (worker %d, %s)", id, w, time.UnixMilli(ms).UTC().Format(time.RFC3339Nano))
			}
			seen[id] = true
			_, w := decodeMs(id)
			if prev, ok := last[w]; ok && id <= prev {
				t.Fatalf("list %d: worker %d went backwards: %d after %d", i, w, id, prev)
			}
			last[w] = id
			n++
		}
	}
	return n
}

func TestIntegration_ClusterThreeNodesGetDistinctWorkerIDs(t *testing.T) {
	zk := zkharness.StartStandalone(t)
	var nodes []*proc
	for i := 1; i <= 3; i++ {
		nodes = append(nodes, startNode(t, binSnowflaked, clusterArgs(t.TempDir(), zk.ConnectString(), "three", fmt.Sprintf("node-%d", i))))
	}
	lists, workers := distinctWorkerIDs(t, nodes)
	checkPeersReachEachOther(t, nodes)
	rows := workerRows(t, zk, "three")
	for i, p := range nodes {
		key := fmt.Sprintf("node-%d", i+1)
		r := rows[key]
		if !r.InService || !r.LeaseHeld || r.Addr != p.addr || workers[r.WorkerID] != key {
			t.Errorf("ZooKeeper row of %s: %+v (listening on %s)", key, r, p.addr)
		}
	}
	code, out, errOut := ctl(t, "status", "--zk", zk.ConnectString(), "--cluster", "three")
	if code != 0 || !strings.Contains(out, `cluster "three": 3 worker(s), 3 in service`) {
		t.Errorf("snowflakectl status: exit %d\n%s%s", code, out, errOut)
	}
	for _, p := range nodes {
		if !strings.Contains(out, p.addr) {
			t.Errorf("snowflakectl status does not list %s:\n%s", p.addr, out)
		}
	}
	t.Logf("snowflakectl status:\n%s", out)
	checkIDs(t, lists...)

	for _, p := range nodes {
		p.signal(syscall.SIGTERM)
	}
	for i, p := range nodes {
		if code := p.exitCode(); code != 0 {
			t.Errorf("node-%d exit %d after SIGTERM", i+1, code)
		}
	}
	for key, r := range workerRows(t, zk, "three") {
		if r.InService || r.LeaseHeld {
			t.Errorf("%s after SIGTERM: %+v (alive and lease must be gone)", key, r)
		}
	}
}

// distinctWorkerIDs waits for each node (node-1, node-2, ...) to be ready,
// takes 1000 IDs from it and checks its worker ID is its own and its
// /clock says so; it returns the IDs by node and the node key by worker.
func distinctWorkerIDs(t *testing.T, nodes []*proc) (lists [][]int64, workers map[int64]string) {
	t.Helper()
	workers = map[int64]string{}
	for i, p := range nodes {
		p.waitReadyz(http.StatusOK, readyTimeout)
		ids := p.ids(1000)
		w := workerOf(t, ids)
		if other, dup := workers[w]; dup {
			t.Fatalf("node-%d and %s both have worker %d", i+1, other, w)
		}
		workers[w] = fmt.Sprintf("node-%d", i+1)
		rep := p.clock()
		if rep.WorkerID != w || rep.ZK.WorkerID != w || rep.ZK.NodeKey != fmt.Sprintf("node-%d", i+1) || !rep.ZK.LeaseHeld || !rep.ZK.Connected {
			t.Errorf("node-%d /clock %+v zk %+v, IDs of worker %d", i+1, rep, rep.ZK, w)
		}
		lists = append(lists, ids)
	}
	return lists, workers
}

// checkPeersReachEachOther: the peer check of each node finds the two
// others under alive/ and reaches them (the node's own clock votes too,
// without being asked over HTTP).
func checkPeersReachEachOther(t *testing.T, nodes []*proc) {
	t.Helper()
	for i, p := range nodes {
		rep := p.waitClock(readyTimeout, func(r clockReport) bool { return r.Peers != nil && r.Peers.Reachable == 2 })
		self := 0
		for _, peer := range rep.Peers.Peers {
			if peer.Error != "" {
				t.Errorf("node-%d peer %+v", i+1, peer)
			}
			if peer.WorkerID == rep.WorkerID && peer.Addr == p.addr {
				self++
			}
		}
		if self != 0 || rep.Peers.Agree != 3 || rep.Peers.Disagree != 0 {
			t.Errorf("node-%d: itself %d times among its peers %+v; %d clocks agree, %d disagree (want 3 and 0, its own counted)",
				i+1, self, rep.Peers.Peers, rep.Peers.Agree, rep.Peers.Disagree)
		}
	}
}

func TestIntegration_ClusterRestartAfterSIGTERMKeepsWorkerIDAndReissuesNothing(t *testing.T) {
	zk := zkharness.StartStandalone(t)
	dir := t.TempDir()
	args := clusterArgs(dir, zk.ConnectString(), "restart", "node-r")
	p := startNode(t, binSnowflaked, args)
	p.waitReadyz(http.StatusOK, readyTimeout)
	c := collect(p.addr)
	c.waitFor(t, 10000)
	p.signal(syscall.SIGTERM)
	if code := p.exitCode(); code != 0 {
		t.Fatalf("exit %d after SIGTERM", code)
	}
	before := c.finish(t)
	maxBefore := slices.Max(before)
	maxBeforeMs, worker := decodeMs(maxBefore)

	// The stop wrote the exact last issued time as the fence, in ZooKeeper
	// and in the cache file.
	e, err := cachefile.Load(filepath.Join(dir, "cache.json"))
	if err != nil {
		t.Fatal(err)
	}
	row := workerRows(t, zk, "restart")["node-r"]
	if row.WorkerID != worker || row.Fence != e.Fence || e.Fence < snowflake.UnixMilli(maxBeforeMs) || e.Fence > snowflake.UnixMilliOf(time.Now()) || e.ZKReported == 0 {
		t.Errorf("after SIGTERM: row %+v, cache %+v, last ID at %d of worker %d", row, e, maxBeforeMs, worker)
	}

	q := startNode(t, binSnowflaked, args)
	start := q.waitStarted()
	q.waitReadyz(http.StatusOK, readyTimeout)
	if int64(number(t, start, "worker_id")) != worker || snowflake.UnixMilli(int64(number(t, start, "fence_ms"))) != e.Fence {
		t.Errorf("restart: worker %v fence %v, want worker %d fence %d", start["worker_id"], start["fence_ms"], worker, e.Fence)
	}
	for _, msg := range []string{
		"clock is behind the fence: waiting for it before serving",
		"lease held by another session of this node key (a crashed predecessor?): waiting for it to expire",
	} {
		if m, ok := q.FindLog(msg); ok {
			t.Errorf("a clean restart waited: %v", m)
		}
	}
	after := q.ids(2000)
	if after[0] <= maxBefore || workerOf(t, after) != worker {
		t.Fatalf("after restart: first ID %d (worker %d), last before %d (worker %d)", after[0], workerOf(t, after), maxBefore, worker)
	}
	checkIDs(t, before, after)
}

func TestIntegration_ClusterSecondProcessWithSameNodeKeyRefused(t *testing.T) {
	zk := zkharness.StartStandalone(t)
	dirA := t.TempDir()
	a := startNode(t, binSnowflaked, clusterArgs(dirA, zk.ConnectString(), "dup", "same-key"))
	a.waitReadyz(http.StatusOK, readyTimeout)
	workerA := workerOf(t, a.ids(100))

	tests := []struct {
		name string
		dir  string
		want []string
	}{
		// Another machine (its own cache file): ZooKeeper's lease refuses it,
		// after waiting for the lease in case its holder were a dead session.
		{"own cache file", t.TempDir(), []string{"worker lease held by another process", `node key \"same-key\"`, a.addr, "is another process running with node key"}},
		// The same cache file: the lock refuses it before ZooKeeper is asked.
		{"same cache file", dirA, []string{"another snowflaked runs with this --cache-file"}},
	}
	// A process stopped while it watches a lease holder that shows no sign
	// of life (frozen: no renewals, its session still there) exits cleanly
	// at once.
	t.Run("SIGTERM while waiting for the lease", func(t *testing.T) {
		a.signal(syscall.SIGSTOP)
		defer a.signal(syscall.SIGCONT)
		b := start(t, binSnowflaked, clusterArgs(t.TempDir(), zk.ConnectString(), "dup", "same-key"))
		b.waitLog("lease held by another session of this node key (a crashed predecessor?): watching whether it renews", startTimeout)
		b.signal(syscall.SIGTERM)
		if code := b.exitCode(); code != 0 {
			t.Errorf("exit %d after SIGTERM while waiting, want 0", code)
		}
		b.waitLog("stopped before serving", time.Second)
	})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			startedAt := time.Now()
			b := start(t, binSnowflaked, clusterArgs(tc.dir, zk.ConnectString(), "dup", "same-key"))
			if code := b.exitCode(); code != 1 {
				t.Fatalf("second process: exit %d, want 1", code)
			}
			t.Logf("second process refused after %s", time.Since(startedAt).Round(time.Millisecond))
			for _, s := range tc.want {
				if !strings.Contains(b.Output(), s) {
					t.Errorf("stderr of the refused process lacks %q:\n%s", s, b.Output())
				}
			}
			if _, ok := b.FindLog("snowflaked starting"); ok {
				t.Error("the refused process started serving")
			}
			// The first one is untouched.
			a.waitReadyz(http.StatusOK, readyTimeout)
			if w := workerOf(t, a.ids(100)); w != workerA {
				t.Errorf("first process now issues worker %d, was %d", w, workerA)
			}
			if r := workerRows(t, zk, "dup")["same-key"]; !r.LeaseHeld || !r.InService || r.Addr != a.addr {
				t.Errorf("row after the refusal: %+v", r)
			}
		})
	}
}

// kill -9 and a restart on the same disk, with the default 10s session
// timeout: the restart removes its dead predecessor's lease at once (it
// holds the cache file's lock, and the lease's session is the one the
// cache file recorded) and starts after the cache file's fence, because the
// claim replaced the cache file's token. The goal: in service within
// --fence-ahead + 1s (it was session timeout + margin, about 10.4s).
func TestIntegration_ClusterRestartAfterKill9WaitsOnlyForLeaseAndFence(t *testing.T) {
	zk := zkharness.StartStandalone(t)
	dir := t.TempDir()
	const session = 10 * time.Second // the default: waiting it out would show
	args := clusterArgs(dir, zk.ConnectString(), "kill9", "node-k", "--zk-session-timeout", session.String())
	p := startNode(t, binSnowflaked, args)
	p.waitReadyz(http.StatusOK, readyTimeout)
	c := collect(p.addr)
	c.waitFor(t, 20000)
	p.signal(syscall.SIGKILL)
	killedAt := time.Now()
	p.exitCode()
	before := c.finish(t)
	maxBefore := slices.Max(before)
	maxBeforeMs, worker := decodeMs(maxBefore)

	q := start(t, binSnowflaked, args)
	est := q.waitLog("worker ID established", startTimeout)
	claimedAfterKill := time.Since(killedAt)
	startLine := q.waitStarted()
	q.waitReadyz(http.StatusOK, readyTimeout)
	readyAfterKill := time.Since(killedAt)
	after := q.ids(2000)
	firstAfterMs, _ := decodeMs(after[0])
	fence := int64(number(t, startLine, "fence_ms"))
	claimTook := time.Duration(number(t, est, "claim_took_ms") * float64(time.Millisecond))
	_, leaseWaited := q.FindLog("lease held by another session of this node key (a crashed predecessor?): waiting for it to expire")
	var gateWaited time.Duration
	if m, ok := q.FindLog("clock passed the fence"); ok {
		gateWaited = time.Duration(number(t, m, "waited_ms") * float64(time.Millisecond))
	}
	t.Logf("kill -9 after %d IDs (last at %d): claim took %s (stale lease of the dead session waited for: %v; bound %s), "+
		"fence %d = last ID + %d ms (from %v), start gate waited %s, claimed %s and in service %s after the kill",
		len(before), maxBeforeMs, claimTook.Round(time.Millisecond), leaseWaited, staleLeaseWait, fence, fence-maxBeforeMs,
		startLine["fence_from"], gateWaited.Round(time.Millisecond), claimedAfterKill.Round(time.Millisecond), readyAfterKill.Round(time.Millisecond))

	if workerOf(t, after) != worker {
		t.Errorf("worker after restart %d, want %d", workerOf(t, after), worker)
	}
	if after[0] <= maxBefore || fence < maxBeforeMs || firstAfterMs <= fence {
		t.Fatalf("reissue risk: first ID after %d (at %d), last before %d (at %d), fence %d", after[0], firstAfterMs, maxBefore, maxBeforeMs, fence)
	}
	checkIDs(t, before, after)
	// The waits are those the protocol requires, no more: the dead
	// session's lease is removed, not waited for, and the start fence is the
	// cache file's, at most --fence-ahead past the kill; so is the gate's wait.
	if leaseWaited {
		t.Errorf("the restart waited for the dead session's lease instead of removing it")
	}
	if _, removed := q.FindLog("removed a stale lease: its process is gone (this process holds the cache file's lock, or it is our own leftover)"); !removed {
		t.Errorf("no log line for removing the predecessor's lease")
	}
	if from, _ := startLine["fence_from"].(string); !strings.Contains(from, "cache file") {
		t.Errorf("start fence from %q, want the cache file's", from)
	}
	if limit := killedAt.Add(clusterFence + 500*time.Millisecond).UnixMilli(); fence > limit {
		t.Errorf("start fence %d is %d ms past the kill: more than --fence-ahead", fence, fence-killedAt.UnixMilli())
	}
	if gateWaited > clusterFence {
		t.Errorf("start gate waited %s, more than --fence-ahead", gateWaited)
	}
	if claimTook >= session/2 {
		t.Errorf("claim took %s: as if the %s session had been waited out", claimTook, session)
	}
}

func TestIntegration_ClusterZooKeeperDownAtStart(t *testing.T) {
	t.Run("after kill -9, with a cache file: serves the cached worker ID up to its ZooKeeper fence and registers once ZooKeeper is back", func(t *testing.T) {
		zk := zkharness.StartStandalone(t)
		dir := t.TempDir()
		args := clusterArgs(dir, zk.ConnectString(), "down", "node-d")
		p := startNode(t, binSnowflaked, args)
		p.waitReadyz(http.StatusOK, readyTimeout)
		before := p.ids(1000)
		worker := workerOf(t, before)
		p.signal(syscall.SIGKILL)
		p.exitCode()
		if err := zk.StopAll(); err != nil {
			t.Fatal(err)
		}

		q := startNode(t, binSnowflaked, args)
		q.waitLog("ZooKeeper unreachable at start: serving the cached worker ID up to the ZooKeeper fence acknowledged for its token; registering once ZooKeeper answers", startTimeout)
		q.waitReadyz(http.StatusOK, readyTimeout)
		after := q.ids(1000)
		if workerOf(t, after) != worker || after[0] <= slices.Max(before) {
			t.Fatalf("from the cache: worker %d first ID %d; want worker %d after %d", workerOf(t, after), after[0], worker, slices.Max(before))
		}
		if rep := q.clock(); !rep.ZK.FromCache || rep.ZK.Connected || rep.ZK.LeaseHeld {
			t.Errorf("/clock zk while ZooKeeper is down: %+v", rep.ZK)
		}

		backAt := time.Now()
		if err := zk.StartAll(); err != nil {
			t.Fatal(err)
		}
		row := waitRow(t, zk, "down", "node-d", readyTimeout, func(r coordinator.WorkerInfo) bool {
			return r.InService && r.LeaseHeld && r.LastReport >= snowflake.UnixMilliOf(backAt)
		})
		if row.WorkerID != worker || row.Addr != q.addr {
			t.Errorf("registered row %+v, want worker %d at %s", row, worker, q.addr)
		}
		q.waitClock(readyTimeout, func(r clockReport) bool { return !r.ZK.FromCache && r.ZK.LeaseHeld && r.ZK.Connected })
		checkIDs(t, before, append(after, q.ids(1000)...))
		q.signal(syscall.SIGTERM)
		if code := q.exitCode(); code != 0 {
			t.Errorf("exit %d", code)
		}
	})
	// A clean stop lowers the ZooKeeper fence to the last issued ID (so the
	// node key can start anywhere at once), and the cache file's copy of
	// that grant first: a restart while ZooKeeper is down has nothing it may
	// issue, stays out with zk_fence, and serves once ZooKeeper answers.
	t.Run("after a clean stop, with a cache file: out of service until ZooKeeper is back", func(t *testing.T) {
		zk := zkharness.StartStandalone(t)
		dir := t.TempDir()
		args := clusterArgs(dir, zk.ConnectString(), "down", "node-c")
		p := startNode(t, binSnowflaked, args)
		p.waitReadyz(http.StatusOK, readyTimeout)
		before := p.ids(1000)
		p.signal(syscall.SIGTERM)
		if code := p.exitCode(); code != 0 {
			t.Fatalf("exit %d", code)
		}
		if err := zk.StopAll(); err != nil {
			t.Fatal(err)
		}
		q := startNode(t, binSnowflaked, args)
		rep := q.waitClock(readyTimeout, func(r clockReport) bool { return r.Failing["zk_fence"] != "" })
		if code, body := q.get("/id"); code != http.StatusServiceUnavailable {
			t.Fatalf("/id with no ZooKeeper grant: %d %s (clock %+v)", code, body, rep)
		}
		if err := zk.StartAll(); err != nil {
			t.Fatal(err)
		}
		q.waitReadyz(http.StatusOK, readyTimeout)
		checkIDs(t, before, q.ids(1000))
	})
	t.Run("without a cache file: refuses to start", func(t *testing.T) {
		zk := zkharness.StartStandalone(t)
		if err := zk.StopAll(); err != nil {
			t.Fatal(err)
		}
		p := start(t, binSnowflaked, clusterArgs(t.TempDir(), zk.ConnectString(), "down", "node-n"))
		if code := p.exitCode(); code != 1 {
			t.Fatalf("exit %d, want 1", code)
		}
		for _, s := range []string{"did not answer", "there is no cache file", "a first start needs ZooKeeper"} {
			if !strings.Contains(p.Output(), s) {
				t.Errorf("stderr lacks %q:\n%s", s, p.Output())
			}
		}
	})
}

func TestIntegration_ClusterSurvivesZooKeeperLeaderLossUnderLoad(t *testing.T) {
	ens := zkharness.StartEnsemble(t, 3)
	var nodes []*proc
	for i := 1; i <= 3; i++ {
		nodes = append(nodes, startNode(t, binSnowflaked, clusterArgs(t.TempDir(), ens.ConnectString(), "leader", fmt.Sprintf("node-%d", i))))
	}
	// Two clients per node: single IDs (/id) and batches, paced to keep the
	// number of IDs the checker holds moderate.
	var cols []*collector
	for _, p := range nodes {
		p.waitReadyz(http.StatusOK, readyTimeout)
		cols = append(cols, collectPath(p.addr, "/id", 0), collectPath(p.addr, "/ids?count=100", time.Millisecond))
	}
	for _, c := range cols {
		c.waitFor(t, 1000)
	}
	workersBefore := map[string]int64{}
	for key, r := range workerRows(t, ens, "leader") {
		workersBefore[key] = r.WorkerID
	}

	leader, err := ens.Leader()
	if err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	// A new leader, then fresh reports from every node.
	waitNewLeader(t, ens, leader, killedAt)
	for i := range nodes {
		key := fmt.Sprintf("node-%d", i+1)
		r := waitRow(t, ens, "leader", key, readyTimeout, func(r coordinator.WorkerInfo) bool { return r.LastReport > snowflake.UnixMilliOf(killedAt) })
		t.Logf("%s (worker %d) reported again %s after the kill", key, r.WorkerID, r.LastReport.Sub(snowflake.UnixMilliOf(killedAt)))
		if r.WorkerID != workersBefore[key] || !r.LeaseHeld {
			t.Errorf("%s after the leader loss: %+v, worker was %d", key, r, workersBefore[key])
		}
	}
	// More load after the reports resumed.
	for _, c := range cols {
		c.waitFor(t, c.count()+1000)
	}
	lists := finishLeaderLossLoad(t, nodes, cols)
	n := checkIDs(t, lists...)
	t.Logf("checker: %d IDs from 3 nodes (6 clients), no duplicate, every worker increasing per client", n)
	checkNodesAfterLeaderLoss(t, nodes, workersBefore)
}

// waitNewLeader waits until a server of ens other than leader, killed at
// killedAt, leads; if none does in time it logs every server's log tail
// and fails.
func waitNewLeader(t *testing.T, ens *zkharness.Cluster, leader *zkharness.Server, killedAt time.Time) {
	t.Helper()
	deadline := time.Now().Add(zkharness.StartTimeout)
	for {
		l, err := ens.Leader()
		if err == nil && l != leader {
			t.Logf("server %d leads %s after server %d was killed", l.ID(), time.Since(killedAt).Round(time.Millisecond), leader.ID())
			return
		}
		if time.Now().After(deadline) {
			for _, s := range ens.Servers {
				t.Logf("ZooKeeper server %d log tail:\n%s", s.ID(), fileTail(s.LogPath(), 40))
			}
			t.Fatalf("no new leader within %s (last: leader %v, %v)", zkharness.StartTimeout, l, err)
		}
		time.Sleep(pollEvery)
	}
}

// finishLeaderLossLoad stops the two collectors of each node (cols[2i]
// and cols[2i+1] for nodes[i]) and checks that the leader loss failed no
// request but with a brief 503, and that each node is back in service;
// it returns the IDs of each collector.
func finishLeaderLossLoad(t *testing.T, nodes []*proc, cols []*collector) [][]int64 {
	t.Helper()
	var lists [][]int64
	for j, c := range cols {
		i := j / 2
		ids := c.finish(t)
		lists = append(lists, ids)
		var errWindow time.Duration
		if len(c.errAt) > 0 {
			errWindow = c.errAt[len(c.errAt)-1].Sub(c.errAt[0])
		}
		t.Logf("node-%d %s: %d IDs, %d transport errors, non-200 answers %v within %s %q",
			i+1, []string{"/id", "/ids"}[j%2], len(ids), c.errs, c.statuses, errWindow.Round(time.Millisecond), c.bodies)
		// /id never depends on ZooKeeper: the loss of the leader must not
		// fail a request, unless the session expired (then the node leaves
		// service briefly, 503, until the lease is back).
		if c.errs > 0 {
			t.Errorf("node-%d: %d transport errors", i+1, c.errs)
		}
		for code := range c.statuses {
			if code != http.StatusServiceUnavailable {
				t.Errorf("node-%d: answers with status %d", i+1, code)
			}
		}
		if errWindow > zkSession+staleLeaseWait {
			t.Errorf("node-%d: 503s over %s, not a brief retry", i+1, errWindow)
		}
		nodes[i].waitReadyz(http.StatusOK, readyTimeout)
	}
	return lists
}

// checkNodesAfterLeaderLoss checks that each node is connected to
// ZooKeeper, holds its lease and kept its worker ID (workersBefore, by
// node key).
func checkNodesAfterLeaderLoss(t *testing.T, nodes []*proc, workersBefore map[string]int64) {
	t.Helper()
	for i, p := range nodes {
		rep := p.clock()
		if !rep.ZK.Connected || !rep.ZK.LeaseHeld || rep.WorkerID != workersBefore[fmt.Sprintf("node-%d", i+1)] {
			t.Errorf("node-%d after the leader loss: %+v zk %+v", i+1, rep, rep.ZK)
		}
	}
}

func TestIntegration_ClusterZooKeeperOutageLeavesServiceAndComesBack(t *testing.T) {
	zk := zkharness.StartStandalone(t)
	const fenceAhead = 3 * time.Second // out of service with a third of it left: ~2s after the last renewal
	p := startNode(t, binSnowflaked, clusterArgs(t.TempDir(), zk.ConnectString(), "outage", "node-o", "--zk-fence-ahead", fenceAhead.String()))
	p.waitReadyz(http.StatusOK, readyTimeout)
	before := p.ids(1000)
	worker := workerOf(t, before)

	stoppedAt := time.Now()
	if err := zk.StopAll(); err != nil {
		t.Fatal(err)
	}
	_, body := p.waitReadyz(http.StatusServiceUnavailable, readyTimeout)
	outAfter := time.Since(stoppedAt)
	if !strings.Contains(body, `"reason":"zk_fence"`) && !strings.Contains(body, `"reason":"lease_lost"`) {
		t.Fatalf("/readyz while ZooKeeper is down: %s, want zk_fence or lease_lost", body)
	}
	t.Logf("out of service %s after ZooKeeper stopped (--zk-fence-ahead %s): %s", outAfter.Round(time.Millisecond), fenceAhead, body)
	if code, body := p.get("/id"); code != http.StatusServiceUnavailable {
		t.Errorf("/id out of service: %d %s", code, body)
	}
	// The image's health check says so too.
	if code, out, errOut := ctl(t, "probe", "http://"+p.addr+"/readyz"); code != 1 || !strings.Contains(errOut, "503") || !strings.Contains(errOut, "zk_fence") {
		t.Errorf("snowflakectl probe while out of service: exit %d, %q %q", code, out, errOut)
	}
	// Keep ZooKeeper down longer than the session timeout; the node stays out.
	for time.Since(stoppedAt) < zkSession+time.Second {
		if code, body := p.get("/readyz"); code != http.StatusServiceUnavailable {
			t.Fatalf("back in service while ZooKeeper is down: %d %s", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}

	restartedAt := time.Now()
	if err := zk.StartAll(); err != nil {
		t.Fatal(err)
	}
	p.waitReadyz(http.StatusOK, readyTimeout)
	back := time.Since(restartedAt)
	_, expired := p.FindLog("ZooKeeper session expired: lease lost, re-creating it")
	t.Logf("ZooKeeper down %s; node back in service %s after ZooKeeper was started again (session expired and lease re-created: %v)",
		restartedAt.Sub(stoppedAt).Round(time.Millisecond), back.Round(time.Millisecond), expired)
	if code, out, errOut := ctl(t, "probe", "http://"+p.addr+"/readyz"); code != 0 || !strings.Contains(out, "200 OK") {
		t.Errorf("snowflakectl probe in service: exit %d, %q %q", code, out, errOut)
	}
	after := p.ids(1000)
	if workerOf(t, after) != worker {
		t.Errorf("worker after the outage %d, want %d", workerOf(t, after), worker)
	}
	r := waitRow(t, zk, "outage", "node-o", readyTimeout, func(r coordinator.WorkerInfo) bool {
		return r.InService && r.LeaseHeld && r.LastReport >= snowflake.UnixMilliOf(restartedAt)
	})
	if r.WorkerID != worker {
		t.Errorf("row after the outage %+v, want worker %d", r, worker)
	}
	checkIDs(t, before, after)
	if rep := p.clock(); rep.ZK.WorkerID != worker || !rep.ZK.LeaseHeld || rep.ZK.LastReportAgeMs > (2*reportInterval+time.Second).Milliseconds() {
		t.Errorf("/clock zk after the outage: %+v", rep.ZK)
	}
}

// A partition between the node and a running ZooKeeper, longer than the
// session timeout, really expires the session (ZooKeeper deletes the lease
// and alive znodes). The node leaves service (zk_fence while cut off; then
// lease_lost until the lease is back), re-creates the lease on a new session
// when the partition ends, and keeps its worker ID.
func TestIntegration_ClusterSessionExpiryByPartition(t *testing.T) {
	zk := zkharness.StartStandalone(t)
	proxy := zkproxy.Start(t, zk.ConnectString())
	p := startNode(t, binSnowflaked, clusterArgs(t.TempDir(), proxy.Addr(), "expiry", "node-e", "--zk-fence-ahead", "3s"))
	p.waitReadyz(http.StatusOK, readyTimeout)
	before := p.ids(1000)
	worker := workerOf(t, before)
	session := p.clock().ZK

	cutAt := time.Now()
	proxy.Block()
	_, body := p.waitReadyz(http.StatusServiceUnavailable, readyTimeout)
	t.Logf("cut off from ZooKeeper: out of service after %s: %s", time.Since(cutAt).Round(time.Millisecond), body)
	if !strings.Contains(body, `"reason":"zk_fence"`) && !strings.Contains(body, `"reason":"lease_lost"`) {
		t.Fatalf("/readyz while cut off: %s, want zk_fence or lease_lost", body)
	}
	// ZooKeeper (still up) expires the session: its lease disappears.
	waitRow(t, zk, "expiry", "node-e", readyTimeout, func(r coordinator.WorkerInfo) bool { return !r.LeaseHeld && !r.InService })
	t.Logf("ZooKeeper dropped the lease and alive znodes %s after the cut", time.Since(cutAt).Round(time.Millisecond))
	if code, body := p.get("/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("in service without a lease: %d %s", code, body)
	}

	healedAt := time.Now()
	proxy.Unblock()
	p.waitLog("ZooKeeper session expired: lease lost, re-creating it", readyTimeout)
	p.waitReadyz(http.StatusOK, readyTimeout)
	t.Logf("partition of %s; back in service %s after it ended", healedAt.Sub(cutAt).Round(time.Millisecond), time.Since(healedAt).Round(time.Millisecond))
	after := p.ids(1000)
	if workerOf(t, after) != worker {
		t.Errorf("worker after the expiry %d, want %d", workerOf(t, after), worker)
	}
	rep := p.clock()
	if rep.ZK.WorkerID != worker || !rep.ZK.LeaseHeld {
		t.Errorf("/clock zk after the expiry: %+v (before: %+v)", rep.ZK, session)
	}
	r := waitRow(t, zk, "expiry", "node-e", readyTimeout, func(r coordinator.WorkerInfo) bool { return r.InService && r.LeaseHeld })
	if r.WorkerID != worker {
		t.Errorf("row after the expiry %+v, want worker %d", r, worker)
	}
	checkIDs(t, before, after)
}

// startPeerCluster starts three chaos-build nodes in cluster on a fresh
// ZooKeeper with fast peer rounds (200ms, max offset 1s) and waits until
// they are in service.
func startPeerCluster(t *testing.T, cluster string) []*proc {
	t.Helper()
	zk := zkharness.StartStandalone(t)
	var nodes []*proc
	for i := 1; i <= 3; i++ {
		nodes = append(nodes, startNode(t, binChaos, clusterArgs(t.TempDir(), zk.ConnectString(), cluster, fmt.Sprintf("node-%d", i),
			"--peer-interval", "200ms", "--peer-max-offset", "1s")))
	}
	for _, p := range nodes {
		p.waitReadyz(http.StatusOK, readyTimeout)
	}
	return nodes
}

// One node whose clock is off (chaos build: +3s) leaves service with
// peer_offset, while the nodes with good clocks stay in service: a bad clock
// must not take the cluster down, nor be the one left serving.
func TestIntegration_ClusterPeerCheckTakesOutOnlyTheNodeWithABadClock(t *testing.T) {
	nodes := startPeerCluster(t, "peers")
	for _, p := range nodes {
		p.waitClock(readyTimeout, func(r clockReport) bool { return r.Peers != nil && r.Peers.Reachable == 2 })
	}
	bad := nodes[2]
	if code, body := bad.do(http.MethodPost, "/debug/chaos/clock?offset=3s"); code != http.StatusOK {
		t.Fatalf("chaos offset: %d %s", code, body)
	}
	// +3s is beyond --fence-ahead (1s): first a suspect jump (clock_jump),
	// which asks the peers at once; they disagree, so peer_offset fails too.
	rep := bad.waitClock(readyTimeout, func(r clockReport) bool { return r.Failing["peer_offset"] != "" })
	t.Logf("node with the +3s clock: %s (failing: %v)", rep.Reason, rep.Failing)
	// The good nodes stay in service over several peer rounds (each 200ms).
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		for i, p := range nodes[:2] {
			if code, body := p.get("/readyz"); code != http.StatusOK {
				t.Fatalf("node-%d (good clock) left service: %s", i+1, body)
			}
		}
		if code, body := bad.get("/readyz"); code == http.StatusOK {
			t.Fatalf("the node with the bad clock came back while still off: %s", body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, body := bad.do(http.MethodPost, "/debug/chaos/clock?offset=0"); code != http.StatusOK {
		t.Fatalf("chaos reset: %d %s", code, body)
	}
	bad.waitReadyz(http.StatusOK, readyTimeout)
}

// fileTail returns the last n lines of a file (or why it cannot be read).
// The split scenario: three nodes, node 1's clock 5s behind (it waits
// out its rollback and comes back), node 3 down. With two clocks that
// disagree nobody has a majority: node 2, whose clock is right, must stay
// in service for the whole observation, flagging the disagreement; node 1
// stays in too (no NTP here to judge it).
func TestIntegration_ClusterPeerSplitKeepsTheGoodNodeIn(t *testing.T) {
	nodes := startPeerCluster(t, "split")
	behind, good, down := nodes[0], nodes[1], nodes[2]
	if code, body := behind.do(http.MethodPost, "/debug/chaos/clock?offset=-5s"); code != http.StatusOK {
		t.Fatalf("chaos offset: %d %s", code, body)
	}
	// With all three up, node 1 is the outlier (2 of 3 clocks disagree).
	behind.waitClock(readyTimeout, func(r clockReport) bool { return r.Failing["peer_offset"] != "" })
	down.signal(syscall.SIGKILL)
	down.exitCode()
	// Node 3's alive znode goes with its session; then two clocks disagree
	// with no majority: node 1 returns, node 2 flags the split.
	good.waitClock(readyTimeout, func(r clockReport) bool { return r.Peers != nil && r.Peers.Split && r.Peers.Reachable == 1 })
	_, body := behind.waitReadyz(http.StatusOK, readyTimeout)
	t.Logf("node 1 (5s behind) back in service with node 3 down: %s", body)
	rounds := 0
	deadline := time.Now().Add(3 * time.Second) // 15 peer rounds
	for time.Now().Before(deadline) {
		if code, body := good.get("/readyz"); code != http.StatusOK {
			t.Fatalf("node 2 (good clock) left service: %s", body)
		}
		if r := good.clock(); r.Peers == nil || !r.Peers.Split || r.Peers.Disagree != 1 {
			t.Fatalf("node 2's peer round: %+v, want a split with one clock disagreeing", r.Peers)
		}
		rounds++
		time.Sleep(100 * time.Millisecond)
	}
	if v, ok := good.metrics()[series("snowflaked_peer_split")]; !ok || v != 1 {
		t.Errorf("snowflaked_peer_split = %v (%v), want 1", v, ok)
	}
	t.Logf("node 2 stayed in service for %d checks over 3s with a split flagged", rounds)
}

func fileTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
