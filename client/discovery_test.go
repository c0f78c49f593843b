package client

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeDiscovery is a Discovery whose list the test sets.
type fakeDiscovery struct {
	mu      sync.Mutex
	nodes   []string
	changed chan struct{}
}

func newFakeDiscovery(nodes ...string) *fakeDiscovery {
	return &fakeDiscovery{nodes: nodes, changed: make(chan struct{})}
}

func (d *fakeDiscovery) Nodes() ([]string, <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.nodes), d.changed
}

func (d *fakeDiscovery) set(nodes ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.nodes = nodes
	close(d.changed)
	d.changed = make(chan struct{})
}

// The client calls the nodes its Discovery gives and follows its changes;
// Servers is the same as a Static list.
func TestDiscoveryIsFollowed(t *testing.T) {
	a, b := startFake(t, 1, nil), startFake(t, 2, nil)
	tests := []struct {
		name   string
		cfg    Config
		change func()      // nil: the list never changes
		after  []*fakeNode // the nodes called after the change
	}{
		{"Servers", Config{Servers: []string{a.addr}}, nil, []*fakeNode{a}},
		{"Static", Config{Discovery: Static{a.addr}}, nil, []*fakeNode{a}},
	}
	d := newFakeDiscovery(a.addr)
	tests = append(tests, struct {
		name   string
		cfg    Config
		change func()
		after  []*fakeNode
	}{"changing", Config{Discovery: d}, func() { d.set(b.addr) }, []*fakeNode{b}})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, tc.cfg)
			if got := c.Nodes(); !slices.Equal(got, []string{a.addr}) {
				t.Fatalf("Nodes() = %q, want %q", got, a.addr)
			}
			if tc.change != nil {
				tc.change()
			}
			var want []string
			for _, f := range tc.after {
				want = append(want, f.addr)
			}
			eventually(t, "the client follows the list", func() bool { return slices.Equal(c.Nodes(), want) })
			before := tc.after[0].requests.Load()
			if _, err := c.NextN(context.Background(), 3); err != nil {
				t.Fatal(err)
			}
			if tc.after[0].requests.Load() != before+1 {
				t.Fatalf("the call did not go to %s", tc.after[0].addr)
			}
		})
	}
}

// listNode answers GET /cluster/nodes with what the test sets.
type listNode struct {
	addr     string
	status   atomic.Int64
	body     atomic.Pointer[string]
	requests atomic.Int64
	srv      *http.Server
}

func startListNode(t *testing.T, body string) *listNode {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &listNode{addr: ln.Addr().String()}
	n.status.Store(200)
	n.body.Store(&body)
	n.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.requests.Add(1)
		if r.URL.Path != "/cluster/nodes" || r.Method != http.MethodGet {
			writeBody(w, 404, `{"error":{"code":"not_found","message":"no endpoint"}}`)
			return
		}
		writeBody(w, int(n.status.Load()), *n.body.Load())
	})}
	go func() { _ = n.srv.Serve(ln) }()
	t.Cleanup(func() { _ = n.srv.Close() })
	return n
}

func (n *listNode) set(body string) { n.body.Store(&body) }

// nodesBody is a /cluster/nodes answer listing addrs.
func nodesBody(addrs ...string) string {
	var b strings.Builder
	b.WriteString(`{"nodes":[`)
	for i, a := range addrs {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"worker_id":` + string(rune('0'+i)) + `,"addr":"` + a + `"}`)
	}
	b.WriteString("]}")
	return b.String()
}

func newBootstrap(t *testing.T, cfg BootstrapConfig) *Bootstrap {
	t.Helper()
	b, err := NewBootstrap(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// NewBootstrap takes the list of the first seed that answers one; a seed
// that answers no list, a bad one or an empty one is passed over.
func TestBootstrapStart(t *testing.T) {
	good := nodesBody("10.0.0.1:8080", "10.0.0.2:8080")
	tests := []struct {
		name   string
		status int
		body   string
		why    string // in the error when the first seed is alone
	}{
		{"down", 0, "", "refused"},
		{"500", 500, `{"error":{"code":"internal","message":"boom"}}`, "500 internal"},
		{"404 (an older node)", 404, `{"error":{"code":"not_found","message":"no endpoint"}}`, "404 not_found"},
		{"not JSON", 200, "<html>", "not JSON"},
		{"empty", 200, `{"nodes":[]}`, "answered no node in service"},
		{"no nodes key", 200, `{}`, "answered no node in service"},
		{"not host:port", 200, `{"nodes":[{"worker_id":1,"addr":"nohost"}]}`, `"nohost" is not host:port`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var first string
			if tc.status == 0 {
				first = closedAddr(t)
			} else {
				n := startListNode(t, tc.body)
				n.status.Store(int64(tc.status))
				first = n.addr
			}
			second := startListNode(t, good)
			b := newBootstrap(t, BootstrapConfig{Seeds: []string{first, second.addr}})
			if got, _ := b.Nodes(); !slices.Equal(got, []string{"10.0.0.1:8080", "10.0.0.2:8080"}) {
				t.Fatalf("Nodes() = %q", got)
			}
			_, err := NewBootstrap(context.Background(), BootstrapConfig{Seeds: []string{first}})
			if !errors.Is(err, ErrNoNode) || !strings.Contains(err.Error(), tc.why) || !strings.Contains(err.Error(), first) {
				t.Fatalf("the first seed alone: %v; want ErrNoNode naming %s and %q", err, first, tc.why)
			}
		})
	}
}

// A bad BootstrapConfig is ErrInvalidConfig; a context that ends first is
// the context's error.
func TestBootstrapConfig(t *testing.T) {
	for _, cfg := range []BootstrapConfig{
		{},
		{Seeds: []string{"nohost"}},
		{Seeds: []string{"a:1"}, Interval: time.Millisecond},
		{Seeds: []string{"a:1"}, Interval: 2 * time.Hour},
		{Seeds: []string{"a:1"}, Timeout: -time.Second},
	} {
		if _, err := NewBootstrap(context.Background(), cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("NewBootstrap(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := NewBootstrap(ctx, BootstrapConfig{Seeds: []string{blackhole(t)}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: %v, want context.Canceled", err)
	}
}

// The pause between polls is Interval ± 20%, spread over that range.
func TestBootstrapJitter(t *testing.T) {
	b := &Bootstrap{cfg: BootstrapConfig{Interval: time.Second}}
	lo, hi := time.Hour, time.Duration(0)
	for range 1000 {
		d := b.jittered()
		if d < 800*time.Millisecond || d > 1200*time.Millisecond {
			t.Fatalf("pause %v outside 0.8s..1.2s", d)
		}
		lo, hi = min(lo, d), max(hi, d)
	}
	if hi-lo < 300*time.Millisecond {
		t.Fatalf("pauses %v..%v: not spread", lo, hi)
	}
}

// Polls follow the cluster: a change reaches the client; with every node
// and seed failing the last list stays, with a warning; a seed that left
// is not needed while a known node answers.
func TestBootstrapFollowsTheCluster(t *testing.T) {
	a, b := startFake(t, 1, nil), startFake(t, 2, nil)
	seed := startListNode(t, nodesBody(a.addr))
	var logBuf syncBuffer
	bs := newBootstrap(t, BootstrapConfig{Seeds: []string{seed.addr}, Interval: 20 * time.Millisecond, Timeout: 500 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(&logBuf, nil))})
	c := newClient(t, Config{Discovery: bs})
	if got := c.Nodes(); !slices.Equal(got, []string{a.addr}) {
		t.Fatalf("Nodes() = %q, want %s", got, a.addr)
	}

	// b joins.
	seed.set(nodesBody(a.addr, b.addr))
	eventually(t, "b joins", func() bool { return slices.Equal(c.Nodes(), []string{a.addr, b.addr}) })
	eventually(t, "the change is logged", func() bool { return strings.Contains(logBuf.String(), "nodes changed") })

	// Every seed and node fails (a and b answer no list): the list stays.
	seed.status.Store(503)
	polls := seed.requests.Load()
	eventually(t, "failing polls", func() bool { return seed.requests.Load() >= polls+3 })
	eventually(t, "the failure is logged", func() bool { return strings.Contains(logBuf.String(), "keeping the last list") })
	if got := c.Nodes(); !slices.Equal(got, []string{a.addr, b.addr}) {
		t.Fatalf("after failed polls Nodes() = %q, want the last list", got)
	}

	// The seed leaves for good; b, a node found through it, answers that
	// a left.
	_ = seed.srv.Close()
	body := nodesBody(b.addr)
	b.list.Store(&body)
	eventually(t, "a leaves", func() bool { return slices.Equal(c.Nodes(), []string{b.addr}) })
	before := b.requests.Load()
	if _, err := c.NextN(context.Background(), 2); err != nil || b.requests.Load() != before+1 {
		t.Fatalf("after a left: %v, %d requests to b", err, b.requests.Load()-before)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := bs.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-bs.done: // no more polls
	default:
		t.Fatal("Close returned with the poll still running")
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and the test at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
