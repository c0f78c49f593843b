package coordinator

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
	"codeberg.org/snowflaked/snowflaked/snowflake"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// Timings for the integration tests: ZooKeeper runs with tickTime 500ms, so
// session timeouts are clamped to 1s–10s.
const (
	testSession = 2 * time.Second
	testReport  = 200 * time.Millisecond
	waitLong    = 15 * time.Second
	// testFenceAhead is G: six report intervals.
	testFenceAhead = 6 * testReport
)

func serversOf(c *zkharness.Cluster) []string { return strings.Split(c.ConnectString(), ",") }

// testConfig is a config with short timings for key on servers.
func testConfig(t *testing.T, servers []string, key string) Config {
	t.Helper()
	return Config{
		Servers: servers, SessionTimeout: testSession, Cluster: "test", NodeKey: key, CreateCluster: true,
		Advertise: "127.0.0.1:" + portFor(key), Layout: snowflake.DefaultLayout(),
		RecycleAfter: time.Hour, ReportInterval: testReport, ZKFenceAhead: testFenceAhead,
		ConnectTimeout: 3 * time.Second, Log: testsupport.Log(t, nil),
	}
}

// portFor derives a stable fake port from a key, for distinct addresses.
func portFor(key string) string {
	h := 0
	for _, b := range []byte(key) {
		h = (h*31 + int(b)) % 50000
	}
	return strconv.Itoa(10000 + h)
}

// newCoord creates a coordinator closed at cleanup.
func newCoord(t *testing.T, cfg Config) *Coordinator {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_ = c.Close(ctx, 0)
	})
	return c
}

func mustClaim(t *testing.T, c *Coordinator) Identity {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	id, err := c.Claim(ctx, Prior{})
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	return id
}

// testFence is a Fencer the test drives and reads: last is what the test
// says was issued; zk and floor are what the coordinator handed over.
type testFence struct{ last, zk, floor atomic.Int64 }

func (f *testFence) LastIssued() snowflake.UnixMilli { return snowflake.UnixMilli(f.last.Load()) }
func (f *testFence) SetZKFence(fence snowflake.UnixMilli) {
	v := int64(fence)
	for {
		old := f.zk.Load()
		if v <= old || f.zk.CompareAndSwap(old, v) {
			return
		}
	}
}
func (f *testFence) RaiseFloor(floor snowflake.UnixMilli) error {
	v := int64(floor)
	for {
		old := f.floor.Load()
		if v <= old || f.floor.CompareAndSwap(old, v) {
			return nil
		}
	}
}

// transitions records a guard's transitions.
type transitions struct {
	mu  sync.Mutex
	all []health.Transition
}

func (r *transitions) add(tr health.Transition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, tr)
}

func (r *transitions) has(reason health.Reason) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, tr := range r.all {
		if tr.Reason == reason {
			return true
		}
	}
	return false
}

// attachAndRun attaches a new guard to c, starts Run, and stops it at
// cleanup (before c's Close cleanup runs).
func attachAndRun(t *testing.T, c *Coordinator, fs Fencer, setup ...func(*health.Guard)) (*health.Guard, *transitions) {
	t.Helper()
	g := health.New(testsupport.Log(t, nil), nil)
	rec := &transitions{}
	g.OnTransition(rec.add)
	for _, f := range setup {
		f(g)
	}
	c.Attach(g)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, fs) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Run did not return 10s after its context ended")
		}
	})
	return g, rec
}

// waitFor polls cond every 20ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testsupport.Poll(t, timeout, 20*time.Millisecond, what, cond)
}

// rawConn is a plain client (no auth unless given) for inspecting and
// tampering with znodes.
func rawConn(t *testing.T, servers []string, auth string) *zk.Conn {
	t.Helper()
	conn, _, err := zk.Connect(servers, 4*time.Second, zk.WithLogger(zkclient.Logger{Log: zerolog.Nop()}))
	if err != nil {
		t.Fatalf("zk.Connect: %v", err)
	}
	t.Cleanup(conn.Close)
	waitFor(t, waitLong, "a raw ZooKeeper session", func() bool { return conn.State() == zk.StateHasSession })
	if auth != "" {
		if err := conn.AddAuth("digest", []byte(auth)); err != nil {
			t.Fatalf("AddAuth: %v", err)
		}
	}
	return conn
}

func readForeverData(t *testing.T, conn *zk.Conn, path string) (foreverData, *zk.Stat) {
	t.Helper()
	b, st, err := conn.Get(path)
	if err != nil {
		t.Fatalf("Get %s: %v", path, err)
	}
	var d foreverData
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("forever data %s: %v", b, err)
	}
	return d, st
}

func exists(t *testing.T, conn *zk.Conn, path string) (bool, *zk.Stat) {
	t.Helper()
	ok, st, err := conn.Exists(path)
	if err != nil {
		t.Fatalf("Exists %s: %v", path, err)
	}
	return ok, st
}

// writeForeverData overwrites a forever znode's data at version (-1: any).
func writeForeverData(t *testing.T, conn *zk.Conn, path string, d foreverData, version int32) {
	t.Helper()
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Set(path, b, version); err != nil {
		t.Fatalf("set %s: %v", path, err)
	}
}

// allPeers is every live peer of c with its address: PeerIDs, then
// PeerAddrs of them all (the clock check asks only a sample's).
func allPeers(ctx context.Context, c *Coordinator) ([]Peer, error) {
	ids, err := c.PeerIDs(ctx)
	if err != nil {
		return nil, err
	}
	return c.PeerAddrs(ctx, ids)
}

// testAdmin is an Admin on servers with auth, timeout and opts, closed
// when the test ends.
func testAdmin(t testing.TB, servers []string, auth string, timeout time.Duration, opts ...AdminOption) *Admin {
	t.Helper()
	a, err := NewAdmin(servers, auth, timeout, opts...)
	if err != nil {
		t.Fatalf("NewAdmin: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}
