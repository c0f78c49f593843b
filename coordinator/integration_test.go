package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
	"codeberg.org/snowflaked/snowflaked/snowflake"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
	"codeberg.org/snowflaked/snowflaked/tests/zkproxy"
)

func TestIntegration_ThreeNodesPeersAndListWorkers(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	var cs []*Coordinator
	ids := map[int64]string{}
	for i := range 3 {
		cfg := testConfig(t, srv, fmt.Sprintf("node-%d", i))
		if i < 2 { // node-2 writes no version, as a node that predates it
			cfg.Version = "v1.2." + strconv.Itoa(i)
		}
		c := newCoord(t, cfg)
		id := mustClaim(t, c)
		if prev, dup := ids[id.WorkerID]; dup {
			t.Fatalf("worker ID %d given to %s and node-%d", id.WorkerID, prev, i)
		}
		ids[id.WorkerID] = cfg.NodeKey
		if id.Recycled || id.PrevFence != 0 || !strings.HasPrefix(id.Path, "/snowflaked/test/forever/node-") {
			t.Fatalf("fresh identity %+v", id)
		}
		fs := &testFence{}
		attachAndRun(t, c, fs)
		cs = append(cs, c)
	}
	for _, c := range cs {
		waitFor(t, waitLong, "alive znodes of all three", func() bool { return c.Status().AlivePresent })
	}

	peers, err := allPeers(context.Background(), cs[0])
	if err != nil {
		t.Fatalf("Peers: %v", err)
	}
	var want []Peer
	for _, c := range cs[1:] {
		want = append(want, Peer{WorkerID: c.Status().WorkerID, Addr: c.cfg.Advertise})
	}
	slices.SortFunc(want, func(a, b Peer) int { return int(a.WorkerID - b.WorkerID) })
	if !slices.Equal(peers, want) {
		t.Fatalf("Peers = %+v, want %+v (self excluded)", peers, want)
	}

	checkLiveWorkers(t, srv, ids, portFor)

	// After a graceful close the row shows neither lease nor service, and the
	// exact fence.
	if err := cs[0].Close(context.Background(), 1_700_000_000_123); err != nil {
		t.Fatalf("Close: %v", err)
	}
	adm := testAdmin(t, srv, "", 5*time.Second)
	rows, err := adm.ListWorkers(context.Background(), "test")
	if err != nil {
		t.Fatalf("ListWorkers: %v", err)
	}
	r := rows[slices.IndexFunc(rows, func(r WorkerInfo) bool { return r.NodeKey == "node-0" })]
	if r.LeaseHeld || r.InService || r.Fence != 1_700_000_000_123 || r.Version != "v1.2.0" {
		t.Fatalf("closed node's row %+v", r)
	}
	if _, err := adm.ListWorkers(context.Background(), "nosuch"); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("ListWorkers of a missing cluster: %v", err)
	}
}

// checkLiveWorkers checks ListWorkers' rows of the three live nodes: each
// holds its lease and is in service, with its address and version.
func checkLiveWorkers(t *testing.T, srv []string, ids map[int64]string, portFor func(string) string) {
	t.Helper()
	rows, err := testAdmin(t, srv, "", 5*time.Second).ListWorkers(context.Background(), "test")
	if err != nil {
		t.Fatalf("ListWorkers: %v", err)
	}
	if len(rows) != 3 {
		t.Fatalf("ListWorkers: %d rows, want 3: %+v", len(rows), rows)
	}
	for _, r := range rows {
		if ids[r.WorkerID] != r.NodeKey || !r.LeaseHeld || !r.InService || r.Problem != "" || r.LeaseHolder != "" ||
			r.LastReportAgeMs < 0 || r.Fence <= r.LastReport || r.Addr != "127.0.0.1:"+portFor(r.NodeKey) {
			t.Fatalf("row %+v", r)
		}
		wantVersion := map[string]string{"node-0": "v1.2.0", "node-1": "v1.2.1", "node-2": ""}[r.NodeKey]
		if r.Version != wantVersion {
			t.Fatalf("row %s: version %q, want %q", r.NodeKey, r.Version, wantVersion)
		}
	}
}

func TestIntegration_RestartAfterCloseKeepsIDAndExactFence(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	cfg := testConfig(t, srv, "pod-a/0")  // '/' in a node key is escaped
	cfg.SessionTimeout = 30 * time.Second // the server (tickTime 500ms) grants at most 10s
	c1 := newCoord(t, cfg)
	id1 := mustClaim(t, c1)
	if got := c1.Status().SessionTimeoutMs; got != 10_000 {
		t.Fatalf("granted session timeout %dms, want 10000 (clamped by the server)", got)
	}
	if !strings.Contains(id1.Path, "/pod-a%2F0-") {
		t.Fatalf("forever path %s does not hold the escaped key", id1.Path)
	}
	fs := &testFence{}
	attachAndRun(t, c1, fs)
	waitFor(t, waitLong, "a report", func() bool { return c1.Status().Reports >= 1 })
	last := time.Now().UnixMilli() - 5
	if err := c1.Close(context.Background(), snowflake.UnixMilli(last)); err != nil {
		t.Fatalf("Close: %v", err)
	}
	raw := rawConn(t, srv, "")
	if ok, _ := exists(t, raw, "/snowflaked/test/leases/"+fmt.Sprint(id1.WorkerID)); ok {
		t.Fatal("lease still exists after Close")
	}
	stopped := func() bool {
		t.Helper()
		b, _, err := raw.Get(id1.Path)
		if err != nil {
			t.Fatal(err)
		}
		var d foreverData
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatal(err)
		}
		return d.Stopped
	}
	if !stopped() {
		t.Error("the final write does not mark the forever znode stopped")
	}

	c2 := newCoord(t, cfg)
	id2 := mustClaim(t, c2)
	if stopped() {
		t.Error("a new claim left the forever znode marked stopped")
	}
	if id2.WorkerID != id1.WorkerID || id2.Path != id1.Path || id2.PrevFence != snowflake.UnixMilli(last) || id2.Recycled {
		t.Fatalf("after restart %+v, want worker %d path %s fence %d", id2, id1.WorkerID, id1.Path, last)
	}
	// The fence it starts after is a clean stop's (the time of the last
	// ID), which the node waits for only --max-start-wait before it blames
	// its clock.
	if !id2.PrevStopped || id2.PrevNodeKey != cfg.NodeKey {
		t.Errorf("after a clean stop the claim says PrevStopped %v, PrevNodeKey %q; want true, %q", id2.PrevStopped, id2.PrevNodeKey, cfg.NodeKey)
	}
	names, _, err := raw.Children("/snowflaked/test/forever")
	if err != nil || len(names) != 1 {
		t.Fatalf("forever children %v, %v: want exactly one", names, err)
	}
}

// A crash leaves the lease of the dead session behind until the session
// expires: the successor with the same node key waits for it, then takes it.
func TestIntegration_CrashRestartWaitsForStaleLease(t *testing.T) {
	zkc := zkharness.StartStandalone(t)
	srv := serversOf(zkc)
	px := zkproxy.Start(t, srv[0])
	crashed := newCoord(t, testConfig(t, []string{px.Addr()}, "k"))
	id := mustClaim(t, crashed)
	raw := rawConn(t, srv, "")
	lease := fmt.Sprintf("/snowflaked/test/leases/%d", id.WorkerID)
	_, st := exists(t, raw, lease)
	oldOwner := st.EphemeralOwner

	px.Block() // the process "dies": no more heartbeats, no cleanup
	crashAt := time.Now()
	if ok, st := exists(t, raw, lease); !ok || st.EphemeralOwner != oldOwner {
		t.Fatal("the stale lease should still exist right after the crash")
	}
	succ := newCoord(t, testConfig(t, srv, "k"))
	claimAt := time.Now()
	id2 := mustClaim(t, succ)
	took, sinceCrash := time.Since(claimAt), time.Since(crashAt)
	if id2.WorkerID != id.WorkerID {
		t.Fatalf("successor got worker %d, want %d", id2.WorkerID, id.WorkerID)
	}
	ok, st := exists(t, raw, lease)
	if !ok || st.EphemeralOwner == oldOwner || st.EphemeralOwner != succ.getConn().SessionID() {
		t.Fatalf("lease owner %x, want the successor's session %x (old %x)", st.EphemeralOwner, succ.getConn().SessionID(), oldOwner)
	}
	// How long it may wait is checked in virtual time, where load cannot
	// stretch it (TestCrashRestartWaitsAtMostTheStaleLeaseWait).
	t.Logf("successor took the stale lease %v after the crash (Claim %v; session timeout %v)",
		sinceCrash.Round(time.Millisecond), took.Round(time.Millisecond), testSession)
}

func TestIntegration_SameKeyLiveHolderRefused(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	first := newCoord(t, testConfig(t, srv, "dup"))
	id := mustClaim(t, first)
	attachAndRun(t, first, &testFence{}) // it renews: evidently alive
	second := newCoord(t, testConfig(t, srv, "dup"))
	began := time.Now()
	_, err := second.Claim(context.Background(), Prior{})
	if !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("second Claim: %v, want ErrLeaseHeld", err)
	}
	for _, want := range []string{`node key "dup"`, first.cfg.Advertise, sessionHex(first.getConn().SessionID()), "another process"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not name %q", err, want)
		}
	}
	if took := time.Since(began); took > second.staleLeaseWait()+2*time.Second {
		t.Fatalf("refusal took %v, bound is %v", took, second.staleLeaseWait())
	}
	// The first still holds it.
	raw := rawConn(t, srv, "")
	if ok, st := exists(t, raw, fmt.Sprintf("/snowflaked/test/leases/%d", id.WorkerID)); !ok || st.EphemeralOwner != first.getConn().SessionID() {
		t.Fatal("the live holder lost its lease")
	}

	// Another node key holding a worker ID's lease is refused at once.
	other := testConfig(t, srv, "dup")
	other.NodeKey = "intruder"
	c := newCoord(t, other)
	conn, err := c.connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	z := zkclient.Client{Conn: conn, Timeout: time.Second}
	a, err := c.tryLease(context.Background(), z, &foreverNode{path: id.Path, version: -1, workerID: id.WorkerID},
		&zk.CheckVersionRequest{Path: id.Path, Version: -1}, 0)
	if err != nil || a.res != leaseHeldByOther || !strings.Contains(a.holder, `"dup"`) {
		t.Fatalf("tryLease on a held lease: %v %q %v", a.res, a.holder, err)
	}
}

func TestIntegration_ConcurrentClaimsGetDistinctIDs(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	const n = 10
	var cs []*Coordinator
	for i := range n {
		cs = append(cs, newCoord(t, testConfig(t, srv, fmt.Sprintf("c%d", i))))
	}
	ids := make([]Identity, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() { ids[i], errs[i] = c.Claim(context.Background(), Prior{}) })
	}
	wg.Wait()
	seen := map[int64]int{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("claim %d: %v", i, errs[i])
		}
		if j, dup := seen[ids[i].WorkerID]; dup {
			t.Fatalf("worker ID %d given to c%d and c%d", ids[i].WorkerID, j, i)
		}
		seen[ids[i].WorkerID] = i
	}
	raw := rawConn(t, srv, "")
	names, _, _ := raw.Children("/snowflaked/test/forever")
	leases, _, _ := raw.Children("/snowflaked/test/leases")
	if len(names) != n || len(leases) != n {
		t.Fatalf("%d forever znodes and %d leases, want %d each", len(names), len(leases), n)
	}
}

func TestIntegration_LayoutMismatch(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	mustClaim(t, newCoord(t, testConfig(t, srv, "a")))
	cfg := testConfig(t, srv, "b")
	cfg.Layout = snowflake.JS53Layout()
	_, err := newCoord(t, cfg).Claim(context.Background(), Prior{})
	if !errors.Is(err, ErrLayoutMismatch) {
		t.Fatalf("Claim: %v, want ErrLayoutMismatch", err)
	}
	for _, want := range []string{"41/10/12", "41/5/7", `"test"`} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not name %q", err, want)
		}
	}
	raw := rawConn(t, srv, "")
	if names, _, _ := raw.Children("/snowflaked/test/forever"); len(names) != 1 {
		t.Fatalf("a mismatching node created znodes: %v", names)
	}
}

// smallLayout has 4 worker IDs.
func smallLayout() snowflake.Layout {
	l := snowflake.DefaultLayout()
	l.WorkerBits = 2
	return l
}

func TestIntegration_RecycleRace(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	raw := rawConn(t, srv, "")
	cfgFor := func(key string) Config {
		cfg := testConfig(t, srv, key)
		cfg.Layout = smallLayout()
		return cfg
	}
	// Fill the space: owners 0..3 close gracefully with distinct fences.
	base := snowflake.UnixMilliOf(time.Now()) - 60_000
	owner := map[int64]Identity{}
	for i := range 4 {
		c := newCoord(t, cfgFor(fmt.Sprintf("old-%d", i)))
		id := mustClaim(t, c)
		owner[id.WorkerID] = id
		if err := c.Close(context.Background(), base+snowflake.UnixMilli(id.WorkerID)); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	if len(owner) != 4 {
		t.Fatalf("owners %v, want worker IDs 0..3", owner)
	}
	// Fresh reports: nothing may be recycled yet.
	_, err := newCoord(t, cfgFor("early")).Claim(context.Background(), Prior{})
	if !errors.Is(err, errNoFreeWorkerID) || !strings.Contains(err.Error(), "0 hold a lease, 4 more reported within the last 1h0m0s") {
		t.Fatalf("Claim with fresh owners: %v, want ErrNoFreeWorkerID with counts", err)
	}
	// Make the owners stale: last report 2h ago (recycle-after is 1h).
	stale := time.Now().Add(-2 * time.Hour).UnixMilli()
	for _, id := range owner {
		d, st := readForeverData(t, raw, id.Path)
		d.LastTS, d.Updated = snowflake.UnixMilli(stale), snowflake.UnixMilli(stale)
		if _, err := raw.Set(id.Path, mustMarshal(t, d), st.Version); err != nil {
			t.Fatal(err)
		}
	}

	const racers = 7 // including "early", whose znode waits for an ID too
	keys := []string{"early"}
	for i := range racers - 1 {
		keys = append(keys, fmt.Sprintf("new-%d", i))
	}
	ids := make([]Identity, racers)
	errs := make([]error, racers)
	var wg sync.WaitGroup
	for i, k := range keys {
		c := newCoord(t, cfgFor(k))
		wg.Go(func() { ids[i], errs[i] = c.Claim(context.Background(), Prior{}) })
	}
	wg.Wait()
	won := map[int64]string{}
	for i, k := range keys {
		switch {
		case errs[i] == nil:
			if prev, dup := won[ids[i].WorkerID]; dup {
				t.Fatalf("worker ID %d won by %s and %s", ids[i].WorkerID, prev, k)
			}
			won[ids[i].WorkerID] = k
			if !ids[i].Recycled || ids[i].PrevFence != base+snowflake.UnixMilli(ids[i].WorkerID) {
				t.Fatalf("%s: %+v, want recycled with the previous owner's fence %d", k, ids[i], base+snowflake.UnixMilli(ids[i].WorkerID))
			}
		case errors.Is(errs[i], errNoFreeWorkerID):
			if !strings.Contains(errs[i].Error(), "4 hold a lease") {
				t.Fatalf("%s: %v, want counts", k, errs[i])
			}
		default:
			t.Fatalf("%s: %v", k, errs[i])
		}
	}
	if len(won) != 4 {
		t.Fatalf("%d worker IDs taken over, want all 4: %v (errors %v)", len(won), won, errs)
	}
	// Every previous owner is marked as taken over, pointing at its successor.
	for w, id := range owner {
		d, _ := readForeverData(t, raw, id.Path)
		if d.WorkerID == nil || *d.WorkerID != noWorker || d.PrevWorkerID == nil || *d.PrevWorkerID != w ||
			!strings.Contains(d.RecycledTo, "/"+zkclient.EscapeName(won[w])+"-") {
			t.Fatalf("previous owner %s of %d: %+v", id.Path, w, d)
		}
	}
	// The old owner coming back finds no free ID (all leased) and says so.
	_, err = newCoord(t, cfgFor("old-0")).Claim(context.Background(), Prior{})
	if !errors.Is(err, errNoFreeWorkerID) {
		t.Fatalf("evicted owner's Claim: %v, want ErrNoFreeWorkerID", err)
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestIntegration_ExhaustionWithLiveLeases(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	cfgFor := func(key string) Config {
		cfg := testConfig(t, srv, key)
		cfg.Layout = smallLayout()
		return cfg
	}
	for i := range 4 {
		mustClaim(t, newCoord(t, cfgFor(fmt.Sprintf("live-%d", i))))
	}
	_, err := newCoord(t, cfgFor("fifth")).Claim(context.Background(), Prior{})
	if !errors.Is(err, errNoFreeWorkerID) || !strings.Contains(err.Error(), "all 4 worker IDs of the cluster's range 0-3 are taken: 4 hold a lease") {
		t.Fatalf("fifth Claim: %v, want ErrNoFreeWorkerID with counts", err)
	}
}

func TestIntegration_ACLs(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	cfg := testConfig(t, srv, "secure")
	cfg.Auth = "snow:s3cret"
	c := newCoord(t, cfg)
	id := mustClaim(t, c)
	attachAndRun(t, c, &testFence{})
	waitFor(t, waitLong, "alive", func() bool { return c.Status().AlivePresent })

	anon := rawConn(t, srv, "")
	wrong := rawConn(t, srv, "snow:wrong")
	lease := fmt.Sprintf("/snowflaked/test/leases/%d", id.WorkerID)
	alive := fmt.Sprintf("/snowflaked/test/alive/%d", id.WorkerID)
	for _, conn := range []*zk.Conn{anon, wrong} {
		for _, p := range []string{"/snowflaked/test", id.Path, lease, alive} {
			if _, _, err := conn.Get(p); err != nil {
				t.Fatalf("world read of %s: %v", p, err)
			}
			if _, err := conn.Set(p, []byte("x"), -1); !errors.Is(err, zk.ErrNoAuth) {
				t.Fatalf("unauthenticated Set %s: %v, want ErrNoAuth", p, err)
			}
		}
		for _, p := range []string{id.Path, lease, alive} {
			if err := conn.Delete(p, -1); !errors.Is(err, zk.ErrNoAuth) {
				t.Fatalf("unauthenticated Delete %s: %v, want ErrNoAuth", p, err)
			}
		}
		for _, dir := range []string{"forever", "leases", "alive"} {
			if _, err := conn.Create("/snowflaked/test/"+dir+"/x", nil, 0, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrNoAuth) {
				t.Fatalf("unauthenticated Create in %s: %v, want ErrNoAuth", dir, err)
			}
		}
	}
	// With the credentials the same writes work: the test can fail.
	owner := rawConn(t, srv, "snow:s3cret")
	if _, err := owner.Create("/snowflaked/test/alive/probe", nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("authenticated Create: %v", err)
	}
	// A node without the credentials gets a clear error, not a worker ID.
	noAuth := testConfig(t, srv, "intruder")
	_, err := newCoord(t, noAuth).Claim(context.Background(), Prior{})
	if err == nil || !errors.Is(err, zk.ErrNoAuth) || !strings.Contains(err.Error(), "--zk-auth") {
		t.Fatalf("Claim without credentials: %v", err)
	}
}

func TestIntegration_MalformedZnodes(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	var logs testsupport.SyncBuffer
	cfg := testConfig(t, srv, "good")
	cfg.Log = testsupport.Log(t, &logs)
	first := newCoord(t, cfg)
	firstID := mustClaim(t, first)
	raw := rawConn(t, srv, "")
	open := zk.WorldACL(zk.PermAll)
	// Garbage: bad names, undecodable data, and an undecodable znode whose
	// sequence is the next one ZooKeeper hands out.
	_, pst, err := raw.Exists("/snowflaked/test/forever")
	if err != nil {
		t.Fatal(err)
	}
	next := int64(pst.Cversion) + 4 // after the 4 creates below
	for _, z := range []struct{ path, data string }{
		{"/snowflaked/test/forever/garbage", "x"},
		{"/snowflaked/test/forever/_c_short", "x"},
		{"/snowflaked/test/forever/bad%zz-0000000050", `{"worker_id":50}`},
		{fmt.Sprintf("/snowflaked/test/forever/evil-%010d", next), "not json"},
		{"/snowflaked/test/leases/notanumber", "x"},
		{"/snowflaked/test/leases/99999", "x"},
		{"/snowflaked/test/alive/abc", "127.0.0.1:1"},
		{"/snowflaked/test/alive/7", "garbage data"},
	} {
		if _, err := raw.Create(z.path, []byte(z.data), 0, open); err != nil {
			t.Fatalf("create %s: %v", z.path, err)
		}
	}
	// The next node would get worker ID `next`, which the undecodable znode
	// may hold: refused with a clear error, not reused.
	_, err = newCoord(t, testConfig(t, srv, "victim")).Claim(context.Background(), Prior{})
	if err == nil || !strings.Contains(err.Error(), "malformed") || !strings.Contains(err.Error(), fmt.Sprintf("worker ID %d", next)) {
		t.Fatalf("Claim colliding with a malformed znode: %v", err)
	}
	// The one after that is fine, and the garbage was logged, not fatal.
	fine := cfg
	fine.NodeKey = "fine"
	c := newCoord(t, fine)
	id := mustClaim(t, c)
	if id.WorkerID != next+1 {
		t.Fatalf("worker ID %d, want %d", id.WorkerID, next+1)
	}
	for _, want := range []string{"skipping a znode that is not a forever znode"} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("no %q warning in the log:\n%s", want, logs.String())
		}
	}
	// Peers skips the garbage alive entries.
	peers, err := allPeers(context.Background(), c)
	if err != nil || len(peers) != 0 {
		t.Fatalf("Peers = %v, %v; want none (garbage skipped)", peers, err)
	}
	// ListWorkers shows the problems as rows.
	rows, err := testAdmin(t, srv, "", 5*time.Second).ListWorkers(context.Background(), "test")
	if err != nil {
		t.Fatalf("ListWorkers: %v", err)
	}
	problems := 0
	for _, r := range rows {
		if r.Problem != "" {
			problems++
		}
	}
	if problems != 4 {
		t.Fatalf("%d problem rows, want 4 (3 bad names, 1 bad data): %+v", problems, rows)
	}
	// Recycling refuses while an undecodable znode might hold any ID.
	small := testConfig(t, srv, "x")
	small.Cluster = "small"
	small.Layout = smallLayout()
	for i := range 4 {
		small.NodeKey = fmt.Sprintf("s%d", i)
		mustClaim(t, newCoord(t, small))
	}
	if _, err := raw.Create("/snowflaked/small/forever/junk-0000000009", []byte("{"), 0, open); err != nil {
		t.Fatal(err)
	}
	small.NodeKey = "s-extra"
	_, err = newCoord(t, small).Claim(context.Background(), Prior{})
	if err == nil || !strings.Contains(err.Error(), "recycling refused") || !strings.Contains(err.Error(), "junk-0000000009") {
		t.Fatalf("recycling with a malformed znode: %v", err)
	}
	// A node whose own forever znode is garbage refuses to guess.
	if err := first.Close(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Set(firstID.Path, []byte(`{"worker_id":"zero"}`), -1); err != nil {
		t.Fatal(err)
	}
	_, err = newCoord(t, cfg).Claim(context.Background(), Prior{})
	if err == nil || !strings.Contains(err.Error(), "cannot be known") {
		t.Fatalf("Claim with a malformed own znode: %v", err)
	}
}

func TestIntegration_RenewalsMoveFenceAndLastTS(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	cfg := testConfig(t, srv, "clockInfoBuilder")
	c := newCoord(t, cfg)
	id := mustClaim(t, c)
	fs := &testFence{}
	fs.last.Store(time.Now().UnixMilli() - 5)
	attachAndRun(t, c, fs)
	raw := rawConn(t, srv, "")

	// The claim itself wrote a token and a fence G ahead.
	if id.Token == "" || id.ZKFence <= id.PrevFence || id.Incarnation == "" {
		t.Fatalf("claim identity %+v: want a token, a ZooKeeper fence after the previous one, an incarnation", id)
	}
	waitFor(t, waitLong, "a first renewal", func() bool { return c.Status().Reports >= 1 })
	d1, _ := readForeverData(t, raw, id.Path)
	if d1.WorkerID == nil || *d1.WorkerID != id.WorkerID || d1.NodeKey != "clockInfoBuilder" || d1.Addr != cfg.Advertise || d1.Token != id.Token {
		t.Fatalf("renewal data %+v (token %s)", d1, id.Token)
	}
	if lead := d1.Fence - d1.Updated; lead != snowflake.UnixMilli(cfg.ZKFenceAhead.Milliseconds()) {
		t.Fatalf("fence leads the renewal time by %dms, want zk-fence-ahead %v", lead, cfg.ZKFenceAhead)
	}
	if d1.LastTS != d1.Updated {
		t.Fatalf("last_ts %d, want the renewal's time %d", d1.LastTS, d1.Updated)
	}
	waitFor(t, waitLong, "the fence to move", func() bool {
		d, _ := readForeverData(t, raw, id.Path)
		return d.Fence > d1.Fence
	})
	// Every fence ZooKeeper acknowledged reaches the node, and the status.
	waitFor(t, waitLong, "the acknowledged fence handed to the node", func() bool {
		d, _ := readForeverData(t, raw, id.Path)
		st := c.Status()
		return snowflake.UnixMilli(fs.zk.Load()) == d.Fence && snowflake.UnixMilli(st.ZKFence) == d.Fence
	})
	if st := c.Status(); st.LastReportAgeMs < 0 || st.ReportFailures != 0 || !st.Connected || !st.LeaseHeld ||
		st.ZKFenceHeadroomMs <= 0 || st.ZKFenceHeadroomMs > cfg.ZKFenceAhead.Milliseconds() || st.Token != id.Token {
		t.Fatalf("status %+v", st)
	}
	if fs.floor.Load() != 0 {
		t.Fatalf("floor raised to %d without a re-claim", fs.floor.Load())
	}
}

func TestIntegration_SessionExpiryRecreatesLease(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	px := zkproxy.Start(t, srv[0])
	cfg := testConfig(t, []string{px.Addr()}, "expiring")
	cfg.ZKFenceAhead = 12 * time.Second // the fence outlasts the session: the node keeps serving while cut off
	c := newCoord(t, cfg)
	id := mustClaim(t, c)
	g, rec := attachAndRun(t, c, &testFence{})
	waitFor(t, waitLong, "in service", func() bool { return g.Ready() && c.Status().AlivePresent })
	oldSession := c.getConn().SessionID()

	raw := rawConn(t, srv, "")
	lease := fmt.Sprintf("/snowflaked/test/leases/%d", id.WorkerID)
	px.Block()
	waitFor(t, waitLong, "the server to expire the session (lease gone)", func() bool {
		ok, _ := exists(t, raw, lease)
		return !ok
	})
	if !g.Ready() {
		t.Fatal("the node left service while merely disconnected (keep serving)")
	}
	px.Unblock()
	waitFor(t, waitLong, "lease_lost to fail", func() bool { return rec.has(health.ReasonLeaseLost) })
	waitFor(t, waitLong, "the lease to be re-created and the node back in service", func() bool {
		st := c.Status()
		return st.LeaseHeld && st.AlivePresent && g.Ready()
	})
	newSession := c.getConn().SessionID()
	if newSession == oldSession || c.Status().WorkerID != id.WorkerID {
		t.Fatalf("session %x → %x, worker %d → %d", oldSession, newSession, id.WorkerID, c.Status().WorkerID)
	}
	ok, st := exists(t, raw, lease)
	if !ok || st.EphemeralOwner != newSession {
		t.Fatalf("lease owner %x, want the new session %x", st.EphemeralOwner, newSession)
	}
	if ok, st := exists(t, raw, fmt.Sprintf("/snowflaked/test/alive/%d", id.WorkerID)); !ok || st.EphemeralOwner != newSession {
		t.Fatal("alive znode not re-created by the new session")
	}
}

func TestIntegration_AliveFollowsGuard(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	cfg := testConfig(t, srv, "alive")
	c := newCoord(t, cfg)
	id := mustClaim(t, c)
	var ntp *health.Check // a check the test drives, registered before Run starts
	g, _ := attachAndRun(t, c, &testFence{}, func(g *health.Guard) { ntp = g.Check(health.ReasonNTPOffset) })
	raw := rawConn(t, srv, "")
	alive := fmt.Sprintf("/snowflaked/test/alive/%d", id.WorkerID)
	present := func() bool {
		b, st, err := raw.Get(alive)
		if errors.Is(err, zk.ErrNoNode) {
			return false
		}
		if err != nil {
			t.Fatalf("Get %s: %v", alive, err)
		}
		if string(b) != cfg.Advertise || st.EphemeralOwner != c.getConn().SessionID() {
			t.Fatalf("alive data %q owner %x", b, st.EphemeralOwner)
		}
		return true
	}
	if present() {
		t.Fatal("alive exists while a check is pending (starting)")
	}
	for i, step := range []struct {
		do   func()
		want bool
	}{
		{ntp.Pass, true},
		{func() { ntp.Fail("offset 2s") }, false},
		{ntp.Pass, true},
		{g.Stop, false},
	} {
		step.do()
		waitFor(t, waitLong, fmt.Sprintf("step %d: alive present=%v", i, step.want), func() bool {
			return present() == step.want && c.Status().AlivePresent == step.want
		})
	}
}

func TestIntegration_EnsembleLeaderLoss(t *testing.T) {
	ens := zkharness.StartEnsemble(t, 3)
	srv := serversOf(ens)
	cfg := testConfig(t, srv, "ensemble")
	cfg.SessionTimeout = 6 * time.Second
	cfg.ZKFenceAhead = 12 * time.Second // an election takes ~0.5s; the fence must outlast it
	c := newCoord(t, cfg)
	id := mustClaim(t, c)
	g, rec := attachAndRun(t, c, &testFence{})
	waitFor(t, waitLong, "in service", func() bool { return g.Ready() && c.Status().Reports >= 2 })
	session := c.getConn().SessionID()

	leader, err := ens.Leader()
	if err != nil {
		t.Fatal(err)
	}
	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now().UnixMilli()
	before := c.Status().Reports
	var rest []string
	for _, s := range ens.Servers {
		if s != leader {
			rest = append(rest, s.ClientAddr())
		}
	}
	raw := rawConn(t, rest, "")
	waitFor(t, 30*time.Second, "reports to resume after the leader's death", func() bool {
		if c.Status().Reports < before+3 {
			return false
		}
		b, _, err := raw.Get(id.Path)
		if err != nil {
			return false
		}
		var d foreverData
		return json.Unmarshal(b, &d) == nil && d.LastTS > snowflake.UnixMilli(killedAt)
	})
	st := c.Status()
	if !st.LeaseHeld || c.getConn().SessionID() != session || rec.has(health.ReasonLeaseLost) || rec.has(health.ReasonZKFence) {
		t.Fatalf("after leader loss: %+v (session %x → %x), lease_lost or zk_fence seen: %v",
			st, session, c.getConn().SessionID(), rec.has(health.ReasonLeaseLost))
	}
	t.Logf("leader %d killed; %d report failures retried; reports resumed", leader.ID(), st.ReportFailures)
}

// resumeBlocked starts a coordinator for key whose ZooKeeper is cut off,
// checks that Claim gives up with ErrZKUnavailable, resumes it from r and
// runs it; the proxy is returned blocked.
func resumeBlocked(t *testing.T, srv []string, key string, r Resume) (*Coordinator, *health.Guard, *transitions, *testFence, *zkproxy.Proxy) {
	t.Helper()
	px := zkproxy.Start(t, srv[0])
	px.Block()
	cfg := testConfig(t, []string{px.Addr()}, key)
	cfg.ConnectTimeout = time.Second
	c := newCoord(t, cfg)
	began := time.Now()
	if _, err := c.Claim(context.Background(), Prior{}); !errors.Is(err, ErrZKUnavailable) {
		t.Fatalf("Claim with ZooKeeper unreachable: %v, want ErrZKUnavailable", err)
	}
	if took := time.Since(began); took > cfg.ConnectTimeout+2*time.Second {
		t.Fatalf("Claim took %v to give up (connect timeout %v)", took, cfg.ConnectTimeout)
	}
	if err := c.ResumeFromCache(r); err != nil {
		t.Fatal(err)
	}
	fs := &testFence{}
	g, rec := attachAndRun(t, c, fs)
	return c, g, rec, fs, px
}

func TestIntegration_ResumeFromCacheWhenZKDownAtStart(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	c1 := newCoord(t, testConfig(t, srv, "cached"))
	id := mustClaim(t, c1)
	if err := c1.Close(context.Background(), snowflake.UnixMilliOf(time.Now())); err != nil {
		t.Fatal(err)
	}

	// The cached token is still in ZooKeeper: the node serves up to the
	// cached ZooKeeper fence, then carries on as the owner.
	cachedFence := time.Now().Add(time.Minute).UnixMilli()
	c, g, rec, fs, px := resumeBlocked(t, srv, "cached", Resume{
		WorkerID: id.WorkerID, Token: id.Token, ZKFence: snowflake.UnixMilli(cachedFence), Incarnation: id.Incarnation, LastReport: snowflake.UnixMilli(time.Now().UnixMilli() - 1000),
	})
	waitFor(t, waitLong, "in service from the cache", func() bool { return g.Ready() })
	waitFor(t, waitLong, "the cached ZooKeeper fence handed to the node", func() bool { return fs.zk.Load() == cachedFence })
	if st := c.Status(); !st.FromCache || st.LeaseHeld || st.WorkerID != id.WorkerID || snowflake.UnixMilli(st.ZKFence) != snowflake.UnixMilli(cachedFence) {
		t.Fatalf("status while ZK is down: %+v, fence handed over %d", st, fs.zk.Load())
	}
	px.Unblock()
	waitFor(t, waitLong, "the lease once ZooKeeper answers", func() bool {
		st := c.Status()
		return st.LeaseHeld && !st.FromCache && st.Reports >= 1 && st.AlivePresent && g.Ready()
	})
	raw := rawConn(t, srv, "")
	if ok, st := exists(t, raw, fmt.Sprintf("/snowflaked/test/leases/%d", id.WorkerID)); !ok || st.EphemeralOwner != c.getConn().SessionID() {
		t.Fatal("lease not taken by the resumed node")
	}
	if d, _ := readForeverData(t, raw, id.Path); d.Token != id.Token || d.Fence < snowflake.UnixMilli(cachedFence) {
		t.Fatalf("forever data %+v: want the cached token and a fence never below the cached %d", d, cachedFence)
	}
	if rec.has(health.ReasonZKFence) || fs.floor.Load() != 0 {
		t.Fatalf("zk_fence failed (%v) or the floor was raised (%d) for the owner's own token", rec.has(health.ReasonZKFence), fs.floor.Load())
	}

	// A node whose cache names another worker ID than ZooKeeper stays out.
	m, mg, _, _, px2 := resumeBlocked(t, srv, "cached2", Resume{WorkerID: id.WorkerID + 5, Token: "x", ZKFence: snowflake.UnixMilli(cachedFence)})
	mustClaimKey := newCoord(t, testConfig(t, srv, "cached2"))
	mid := mustClaim(t, mustClaimKey) // ZooKeeper maps cached2 to some other worker ID
	if err := mustClaimKey.Close(context.Background(), snowflake.UnixMilliOf(time.Now())); err != nil {
		t.Fatal(err)
	}
	waitFor(t, waitLong, "in service from the cache", func() bool { return mg.Ready() })
	px2.Unblock()
	waitFor(t, waitLong, "lease_lost to fail with the mismatch", func() bool {
		d, ok := mg.Failing()[health.ReasonLeaseLost]
		return ok && strings.Contains(d, fmt.Sprintf("maps node key \"cached2\" to worker ID %d", mid.WorkerID)) &&
			strings.Contains(d, fmt.Sprintf("cached worker ID %d", id.WorkerID+5))
	})
	for range 5 { // it stays so over several rounds
		if mg.Ready() || m.Status().LeaseHeld {
			t.Fatal("a mismatching node took a lease or returned to service")
		}
		time.Sleep(testReport)
	}
}

// Resume from a cache whose token is no longer in ZooKeeper (the node key
// ran elsewhere meanwhile): once ZooKeeper answers the node claims afresh,
// raises its floor to the fence the other process left, and never writes a
// lower fence than ZooKeeper held. When the fresh claim's write commits
// with its answer lost, the next attempt writes the same token, finds it on
// the znode and completes the claim (floor raised first), instead of taking
// its own write for another process's and staying out until restarted.
func TestIntegration_ResumeWithStaleTokenClaimsAfresh(t *testing.T) {
	for _, tc := range []struct {
		name       string
		loseAnswer bool
	}{
		{"the claim's answer arrives", false},
		{"the claim's answer is lost", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := serversOf(zkharness.StartStandalone(t))
			elsewhere := newCoord(t, testConfig(t, srv, "moved"))
			old := mustClaim(t, elsewhere)
			// The other process ran with a fence far ahead, then crashed (its
			// session closes; the fence stays).
			high := time.Now().Add(2 * time.Second).UnixMilli()
			if err := elsewhere.Close(context.Background(), snowflake.UnixMilli(high)); err != nil {
				t.Fatal(err)
			}
			c, g, _, fs, px := resumeBlocked(t, srv, "moved", Resume{
				WorkerID: old.WorkerID, Token: "an-older-token", ZKFence: snowflake.UnixMilliOf(time.Now().Add(time.Minute)), Incarnation: old.Incarnation,
			})
			waitFor(t, waitLong, "in service from the cache", func() bool { return g.Ready() })
			if tc.loseAnswer {
				px.LoseAnswerTo(old.Token, nil) // the claim's write names the token it replaces
			}
			px.Unblock()
			waitFor(t, waitLong, "a fresh claim", func() bool {
				st := c.Status()
				return st.LeaseHeld && st.Reports >= 1 && st.Token != "an-older-token" && st.Token != old.Token
			})
			if tc.loseAnswer && !px.Lost() {
				t.Fatal("no write named the replaced token: the answer was never lost")
			}
			if got := fs.floor.Load(); got != high {
				t.Fatalf("floor raised to %d, want the other process's fence %d", got, high)
			}
			d, _ := readForeverData(t, rawConn(t, srv, ""), old.Path)
			if d.PrevToken != old.Token || d.PrevFence != snowflake.UnixMilli(high) || d.Fence < snowflake.UnixMilli(high) || d.Token != c.Status().Token {
				t.Fatalf("forever data after the fresh claim %+v: want prev token %s, prev fence %d", d, old.Token, high)
			}
		})
	}
}

func TestIntegration_ZKFenceLeavesAndReturns(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	px := zkproxy.Start(t, srv[0])
	cfg := testConfig(t, []string{px.Addr()}, "silent")
	cfg.SessionTimeout = 6 * time.Second // the session outlives the fence
	c := newCoord(t, cfg)
	mustClaim(t, c)
	fs := &testFence{}
	g, _ := attachAndRun(t, c, fs)
	waitFor(t, waitLong, "in service", func() bool { return g.Ready() && c.Status().Reports >= 1 })
	px.Block()
	blockedAt := time.Now().UnixMilli()
	waitFor(t, waitLong, "zk_fence to fail", func() bool {
		d, failing := g.Failing()[health.ReasonZKFence]
		return failing && !g.Ready() && strings.Contains(d, "renewal")
	})
	left := time.Now().UnixMilli()
	// It left with a third of G still to go, and the fence the node may
	// issue up to did not move while ZooKeeper was away.
	if fence := fs.zk.Load(); fence > blockedAt+cfg.ZKFenceAhead.Milliseconds() || fence-left < c.leaveMargin().Milliseconds()-2*testReport.Milliseconds() {
		t.Fatalf("left service at %d with the node's ZooKeeper fence at %d (blocked at %d, G %v)", left, fence, blockedAt, cfg.ZKFenceAhead)
	}
	frozen := fs.zk.Load()
	time.Sleep(cfg.ZKFenceAhead)
	if fs.zk.Load() != frozen {
		t.Fatalf("the fence moved from %d to %d while ZooKeeper was cut off", frozen, fs.zk.Load())
	}
	px.Unblock()
	waitFor(t, waitLong, "zk_fence to pass again", func() bool {
		_, failing := g.Failing()[health.ReasonZKFence]
		return !failing && g.Ready()
	})
	if st := c.Status(); st.FailuresByCause["connection"] == 0 {
		t.Fatalf("no connection failure counted: %+v", st)
	}
}

// A create whose answer is lost (the connection breaks after the server
// applied it) is not blindly retried: Claim lists again, finds the znode and
// uses it, so the key never gets a second forever znode.
func TestIntegration_LostCreateAnswerLeavesNoOrphan(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	mustClaim(t, newCoord(t, testConfig(t, srv, "other"))) // creates the cluster
	px := zkproxy.Start(t, srv[0])
	var logs testsupport.SyncBuffer
	cfg := testConfig(t, []string{px.Addr()}, "lost-answer")
	cfg.Log = testsupport.Log(t, &logs)
	c := newCoord(t, cfg)
	px.LoseAnswerTo("/snowflaked/test/forever/lost-answer-", nil)
	id := mustClaim(t, c)
	if !strings.Contains(logs.String(), "outcome unknown") {
		t.Fatalf("the create's answer was not lost (no retry path taken):\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "created this node key's forever znode") {
		t.Fatal("a second create succeeded: the first one was not applied, or was retried blindly")
	}
	raw := rawConn(t, srv, "")
	names, _, err := raw.Children("/snowflaked/test/forever")
	if err != nil {
		t.Fatal(err)
	}
	var mine []string
	for _, n := range names {
		if strings.HasPrefix(n, "lost-answer-") {
			mine = append(mine, n)
		}
	}
	if len(mine) != 1 || !strings.HasSuffix(id.Path, mine[0]) {
		t.Fatalf("forever znodes of the key: %v (claimed %s), want exactly one", mine, id.Path)
	}
}

// Two forever znodes for one key (a retried create that did succeed, or two
// processes starting at once): the lowest is used, with a warning, and no
// third one is created.
func TestIntegration_DuplicateForeverZnodesUseLowest(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	mustClaim(t, newCoord(t, testConfig(t, srv, "other"))) // creates the cluster
	raw := rawConn(t, srv, "")
	var made []string
	for range 2 {
		now := time.Now().UnixMilli()
		p, err := raw.Create("/snowflaked/test/forever/twin-", mustMarshal(t, foreverData{NodeKey: "twin", LastTS: snowflake.UnixMilli(now), Updated: snowflake.UnixMilli(now)}),
			zk.FlagSequence, zk.WorldACL(zk.PermAll))
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, p)
	}
	var logs testsupport.SyncBuffer
	cfg := testConfig(t, srv, "twin")
	cfg.Log = testsupport.Log(t, &logs)
	id := mustClaim(t, newCoord(t, cfg))
	if id.Path != made[0] {
		t.Fatalf("claimed %s, want the lowest %s", id.Path, made[0])
	}
	if !strings.Contains(logs.String(), "several forever znodes for this node key") {
		t.Fatal("no warning about the duplicate")
	}
	names, _, err := raw.Children("/snowflaked/test/forever")
	if err != nil || len(names) != 3 {
		t.Fatalf("forever children %v, %v: want other + 2 twins", names, err)
	}
}

// A take-over computed from a scan that another take-over overtook must fail,
// even for a worker ID no forever znode names (nothing else to version-check):
// the forever parent's version is the guard.
func TestIntegration_RecycleFromOutdatedScanFails(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	raw := rawConn(t, srv, "")
	cfgFor := func(key string) Config {
		cfg := testConfig(t, srv, key)
		cfg.Layout = smallLayout()
		return cfg
	}
	var gone Identity
	for i := range 4 {
		c := newCoord(t, cfgFor(fmt.Sprintf("old-%d", i)))
		id := mustClaim(t, c)
		if err := c.Close(context.Background(), snowflake.UnixMilliOf(time.Now())); err != nil {
			t.Fatal(err)
		}
		if id.WorkerID == 2 {
			gone = id
		}
	}
	// Worker ID 2 loses its forever znode (deleted by hand): free, unclaimed.
	if err := raw.Delete(gone.Path, -1); err != nil {
		t.Fatal(err)
	}

	// A scans...
	a := newCoord(t, cfgFor("a"))
	conn, err := a.connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	z := zkclient.Client{Conn: conn, Timeout: 5 * time.Second}
	own, err := a.findOrCreateForever(context.Background(), z, 0)
	if err != nil || own.workerID != noWorker {
		t.Fatalf("a's forever znode %+v, %v: want one without a worker ID", own, err)
	}
	s, err := a.scanCluster(context.Background(), z)
	if err != nil {
		t.Fatal(err)
	}
	if ids, _ := s.free(WorkerRange{0, 3}, snowflake.UnixMilliOf(time.Now()), time.Hour); !slices.Equal(ids, []int64{2}) {
		t.Fatalf("free IDs %v, want [2]", ids)
	}
	// ...B takes 2 over and leaves again (its lease is gone)...
	b := newCoord(t, cfgFor("b"))
	bid := mustClaim(t, b)
	if bid.WorkerID != 2 || !bid.Recycled {
		t.Fatalf("b: %+v, want recycled worker ID 2", bid)
	}
	if err := b.Close(context.Background(), snowflake.UnixMilliOf(time.Now())); err != nil {
		t.Fatal(err)
	}
	// ...and A's take-over from its outdated scan fails.
	ops, _, _, _, err := a.recycleOps(s, s.byPath[own.path], 2, snowflake.UnixMilliOf(time.Now()), zkclient.NewToken())
	if err != nil {
		t.Fatal(err)
	}
	failed, err := z.Multi(context.Background(), ops...)
	if !errors.Is(err, zk.ErrBadVersion) || failed != 0 {
		t.Fatalf("take-over from an outdated scan: op %d, %v; want ErrBadVersion on the forever parent", failed, err)
	}
	d, _ := readForeverData(t, raw, bid.Path)
	if d.WorkerID == nil || *d.WorkerID != 2 {
		t.Fatalf("b's forever data %+v lost worker ID 2", d)
	}
	if ok, _ := exists(t, raw, "/snowflaked/test/leases/2"); ok {
		t.Fatal("a lease on 2 exists")
	}
	// A fresh scan sees B's claim (recent) and finds nothing free.
	if _, err := a.Claim(context.Background(), Prior{}); !errors.Is(err, errNoFreeWorkerID) {
		t.Fatalf("a's Claim after the race: %v, want ErrNoFreeWorkerID", err)
	}
}

// TestIntegration_OpenACLsRefusedWithCredentials: a node or cluster create
// with --zk-auth refuses a cluster one of whose znodes anyone may change
// (created without credentials, or squatted by someone else first with
// open ACLs), naming the znode; the properly created cluster is taken.
func TestIntegration_OpenACLsRefusedWithCredentials(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	const auth = "snow:s3cret"
	owner := rawConn(t, srv, auth)
	open := zk.WorldACL(zk.PermAll)
	spec := ClusterSpec{Layout: snowflake.DefaultLayout()}
	for _, tc := range []struct {
		name    string
		opened  string // the znode created with open ACLs ("" for none)
		wantErr bool
	}{
		{"created without credentials", "cluster", true},
		{"leases squatted", "leases", true},
		{"forever squatted", "forever", true},
		{"a forever znode made without credentials", "forever/node-open-0000000007", true},
		{"a tag made without credentials", "segments/orders", true},
		{"created with credentials", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cluster := strings.ReplaceAll(tc.name, " ", "-")
			base := "/snowflaked/" + cluster
			if _, err := testAdmin(t, srv, auth, 10*time.Second).CreateCluster(context.Background(), cluster, spec); err != nil {
				t.Fatalf("create %s: %v", cluster, err)
			}
			if tc.opened != "" { // one znode open, as a squatter (or a node run without credentials) would have made it
				p := base
				if tc.opened != "cluster" {
					p = base + "/" + tc.opened
				}
				if _, _, err := owner.Exists(p); err != nil {
					t.Fatal(err)
				} else if ok, _, _ := owner.Exists(p); !ok {
					if tc.opened == "segments/orders" {
						secure, _ := zkclient.ACLs(auth)
						if _, err := owner.Create(base+"/segments", nil, 0, secure); err != nil {
							t.Fatalf("create segments: %v", err)
						}
					}
					if _, err := owner.Create(p, nil, 0, open); err != nil {
						t.Fatalf("create %s: %v", p, err)
					}
				} else if _, err := owner.SetACL(p, open, -1); err != nil {
					t.Fatalf("open %s: %v", p, err)
				}
			}
			cfg := testConfig(t, srv, "node")
			cfg.Cluster, cfg.Auth, cfg.CreateCluster, cfg.RecycleAfter = cluster, auth, false, 0
			_, err := newCoord(t, cfg).Claim(context.Background(), Prior{})
			_, cerr := testAdmin(t, srv, auth, 10*time.Second).CreateCluster(context.Background(), cluster, spec)
			if !tc.wantErr {
				if err != nil || cerr != nil {
					t.Fatalf("a cluster created with credentials: claim %v, create %v", err, cerr)
				}
				return
			}
			for what, e := range map[string]error{"claim": err, "cluster create": cerr} {
				if !errors.Is(e, ErrOpenACL) || !strings.Contains(e.Error(), "world:anyone cdrwa") || !strings.Contains(e.Error(), cluster) || !strings.Contains(e.Error(), tc.opened) && tc.opened != "cluster" {
					t.Errorf("%s on a cluster with %s open: %v, want ErrOpenACL naming world:anyone cdrwa", what, tc.opened, e)
				}
			}
		})
	}
}
