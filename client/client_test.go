package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeNode is a snowflaked stand-in on 127.0.0.1: /ids and
// /segment/{tag} answer with increasing IDs unless its behaviour says
// otherwise.
type fakeNode struct {
	addr     string
	next     atomic.Int64 // last ID issued
	requests atomic.Int64
	counts   sync.Map                                                 // batch size -> number of requests
	behave   func(w http.ResponseWriter, r *http.Request, n int) bool // true: answered by the behaviour
	conns    atomic.Int64                                             // connections open now
	list     atomic.Pointer[string]                                   // the /cluster/nodes answer; nil: 404
}

func startFake(t *testing.T, id int64, behave func(w http.ResponseWriter, r *http.Request, n int) bool) *fakeNode {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeNode{addr: ln.Addr().String(), behave: behave}
	f.next.Store(id << 40) // distinct ranges per fake node
	srv := &http.Server{Handler: http.HandlerFunc(f.handle), ConnState: func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			f.conns.Add(1)
		case http.StateClosed, http.StateHijacked:
			f.conns.Add(-1)
		}
	}}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return f
}

func (f *fakeNode) handle(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	if l := f.list.Load(); l != nil && r.URL.Path == "/cluster/nodes" {
		writeBody(w, 200, *l)
		return
	}
	if r.URL.Path == "/bounds" && f.behave != nil && f.behave(w, r, 0) {
		return
	}
	n, err := strconv.Atoi(r.URL.Query().Get("count"))
	if (r.URL.Path != "/ids" && r.URL.Path != "/uuids" && !strings.HasPrefix(r.URL.Path, "/segment/")) || err != nil {
		writeBody(w, 404, `{"error":{"code":"not_found","message":"no endpoint"}}`)
		return
	}
	v, _ := f.counts.LoadOrStore(n, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
	if f.behave != nil && f.behave(w, r, n) {
		return
	}
	var b bytes.Buffer
	for range n {
		fmt.Fprintf(&b, "%d\n", f.next.Add(1))
	}
	writeBody(w, 200, b.String())
}

// writeBody answers with a Content-Length, as snowflaked does.
func writeBody(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

func (f *fakeNode) requestsFor(n int) int64 {
	if v, ok := f.counts.Load(n); ok {
		return v.(*atomic.Int64).Load()
	}
	return 0
}

func unavailable(w http.ResponseWriter, _ *http.Request, _ int) bool {
	w.Header().Set("Retry-After", "5")
	writeBody(w, 503, `{"error":{"code":"out_of_service","message":"clock_rollback"}}`)
	return true
}

// hangUntil is a behaviour that holds every request until release closes
// (or the client hangs up).
func hangUntil(release <-chan struct{}) func(http.ResponseWriter, *http.Request, int) bool {
	return func(_ http.ResponseWriter, r *http.Request, _ int) bool {
		select {
		case <-release:
			return false
		case <-r.Context().Done():
			return true
		}
	}
}

func newClient(t *testing.T, cfg Config) *Client {
	t.Helper()
	c, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// closedAddr is a loopback address nobody listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// callConcurrently runs goroutines callers, each making each calls of
// call(g), and returns what each got, in order; a failed call is a test
// error and ends that caller.
func callConcurrently(t *testing.T, goroutines, each int, call func(g int) (int64, error)) [][]int64 {
	t.Helper()
	got := make([][]int64, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for range each {
				id, err := call(g)
				if err != nil {
					t.Error(err)
					return
				}
				got[g] = append(got[g], id)
			}
		})
	}
	wg.Wait()
	return got
}

// eventually polls cond every 5ms for up to 5s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 1000 {
		if cond() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s: not within 5s", what)
}

// Concurrent Next calls are merged into /ids batches: far fewer requests
// than calls, no batch above MaxBatch, every ID handed out once.
func TestCoalescing(t *testing.T) {
	f := startFake(t, 1, func(http.ResponseWriter, *http.Request, int) bool {
		time.Sleep(time.Millisecond) // a round trip, so callers pile up
		return false
	})
	c := newClient(t, Config{Servers: []string{f.addr}, MaxBatch: 64})
	const goroutines, each = 64, 100
	ids := callConcurrently(t, goroutines, each, func(int) (int64, error) { return c.Next(context.Background()) })
	seen := map[int64]bool{}
	for _, l := range ids {
		for i, id := range l {
			if seen[id] {
				t.Fatalf("ID %d handed out twice", id)
			}
			seen[id] = true
			if i > 0 && id <= l[i-1] {
				t.Fatalf("one caller's IDs went backwards: %d after %d", id, l[i-1])
			}
		}
	}
	if len(seen) != goroutines*each {
		t.Fatalf("%d IDs, want %d", len(seen), goroutines*each)
	}
	req := f.requests.Load()
	f.counts.Range(func(k, _ any) bool {
		if k.(int) > 64 {
			t.Errorf("a batch of %d, MaxBatch 64", k.(int))
		}
		return true
	})
	if req*4 > goroutines*each {
		t.Fatalf("%d requests for %d calls: not coalesced", req, goroutines*each)
	}
	st := c.Stats()
	if st.IDs != goroutines*each || st.Requests != req || st.Errors != 0 {
		t.Fatalf("stats %+v (requests seen %d)", st, req)
	}
	t.Logf("%d calls in %d requests (%.1f IDs per request)", goroutines*each, req, float64(goroutines*each)/float64(req))
}

// Failover: a node that answers 503, one that refuses connections, one
// that accepts and never answers, one that answers garbage, one that
// answers fewer IDs than asked: each is left for the good node, the caller
// sees no error, and the failing node gets no more traffic while down.
func TestFailover(t *testing.T) {
	tests := []struct {
		name   string
		bad    func(t *testing.T) string // returns the bad node's address
		hooked string                    // a substring of the failover error
	}{
		{"503 out of service", func(t *testing.T) string { return startFake(t, 2, unavailable).addr }, "out_of_service"},
		{"connection refused", closedAddr, "connection refused"},
		{"accepts, never answers", func(t *testing.T) string {
			return startFake(t, 2, func(http.ResponseWriter, *http.Request, int) bool { time.Sleep(2 * time.Second); return false }).addr
		}, "timeout"},
		{"garbage", func(t *testing.T) string {
			return startFake(t, 2, func(w http.ResponseWriter, _ *http.Request, _ int) bool {
				writeBody(w, 200, "<html>oops</html>")
				return true
			}).addr
		}, "is not an ID"},
		{"fewer IDs than asked", func(t *testing.T) string {
			return startFake(t, 2, func(w http.ResponseWriter, _ *http.Request, _ int) bool { writeBody(w, 200, "7\n8\n"); return true }).addr
		}, "answered 2 of"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			good := startFake(t, 1, nil)
			bad := tc.bad(t)
			var failovers []string
			var mu sync.Mutex
			c := newClient(t, Config{Servers: []string{bad, good.addr}, Timeout: 300 * time.Millisecond, MaxInFlight: 1,
				Hooks: Hooks{Failover: func(e FailoverEvent) {
					mu.Lock()
					failovers = append(failovers, e.Node+" "+e.Err.Error())
					mu.Unlock()
				}}})
			for i := range 20 {
				if _, err := c.NextN(context.Background(), 3); err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if len(failovers) != 1 || !strings.Contains(failovers[0], tc.hooked) || !strings.HasPrefix(failovers[0], bad) {
				t.Fatalf("failovers %q: want exactly one, from %s, mentioning %q", failovers, bad, tc.hooked)
			}
			if st := c.Stats(); st.Failovers != 1 || st.Errors != 0 || st.IDs != 60 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// Every node down: a clear error naming each node's last failure.
func TestAllNodesDown(t *testing.T) {
	a := startFake(t, 1, unavailable)
	b := closedAddr(t)
	c := newClient(t, Config{Servers: []string{a.addr, b}})
	_, err := c.Next(context.Background())
	if !errors.Is(err, ErrNoNode) {
		t.Fatalf("err %v, want ErrNoNode", err)
	}
	for _, want := range []string{a.addr + ": 503 out_of_service", b + ": ", "refused"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	// Both are down now: the next call fails at once, without requests.
	before := a.requests.Load()
	if _, err := c.Next(context.Background()); !errors.Is(err, ErrNoNode) || a.requests.Load() != before {
		t.Fatalf("second call: %v, %d more requests to a node marked down", err, a.requests.Load()-before)
	}
}

// A 4xx is returned, never retried on another node.
func TestRejectedIsNotRetried(t *testing.T) {
	a := startFake(t, 1, func(w http.ResponseWriter, _ *http.Request, _ int) bool {
		writeBody(w, 400, `{"error":{"code":"invalid_count","message":"count 5000 is above --max-batch 1000"}}`)
		return true
	})
	b := startFake(t, 2, nil)
	c := newClient(t, Config{Servers: []string{a.addr, b.addr}, MaxBatch: 5000, MaxInFlight: 1})
	_, err := c.NextN(context.Background(), 5000)
	if !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), "invalid_count") {
		t.Fatalf("err %v, want ErrRejected with the node's code", err)
	}
	if b.requests.Load() != 0 || a.requests.Load() != 1 {
		t.Fatalf("requests: a %d, b %d; want the rejection alone", a.requests.Load(), b.requests.Load())
	}
}

// A caller's context bounds its wait, even on a node that hangs.
func TestContextCancellation(t *testing.T) {
	hang := startFake(t, 1, func(http.ResponseWriter, *http.Request, int) bool { time.Sleep(3 * time.Second); return false })
	c := newClient(t, Config{Servers: []string{hang.addr}, Timeout: 5 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	began := time.Now()
	_, err := c.Next(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want context.DeadlineExceeded", err)
	}
	if took := time.Since(began); took > 2*time.Second {
		t.Fatalf("returned after %v, the deadline was 100ms", took)
	}
}

// Prefetch serves Next from IDs fetched ahead, refilled in the background,
// and drops them once older than PrefetchMaxAge.
func TestPrefetch(t *testing.T) {
	f := startFake(t, 1, nil)
	c := newClient(t, Config{Servers: []string{f.addr}, Prefetch: 100, PrefetchMaxAge: 200 * time.Millisecond})
	var last int64
	seen := map[int64]bool{}
	for range 300 {
		id, err := c.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if seen[id] {
			t.Fatalf("ID %d handed out twice", id)
		}
		seen[id] = true
		last = max(last, id)
	}
	if r := f.requests.Load(); r > 30 {
		t.Fatalf("%d requests for 300 Next with prefetch 100", r)
	}
	time.Sleep(300 * time.Millisecond) // the buffer goes stale
	id, err := c.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The stale buffer held IDs below what the node issued since; the
	// ID handed out now is a fresh one, newer than any handed before.
	if id <= last || seen[id] {
		t.Fatalf("a stale ID %d (largest handed before %d)", id, last)
	}
}

// A Next that finds the buffer empty while refills are in flight waits
// for them, bounded by its context, instead of sending a request of its
// own beside them.
func TestPrefetchWaitsForRefill(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	f := startFake(t, 1, hangUntil(release))
	c := newClient(t, Config{Servers: []string{f.addr}, Prefetch: 10, MaxInFlight: 4, Timeout: 5 * time.Second})
	t.Cleanup(unblock)
	short := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := c.Next(ctx)
		return err
	}
	eventually(t, "refills reach the node", func() bool { return f.requests.Load() > 0 })
	for i := range 2 {
		if err := short(); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Next %d during the refill: %v, want context.DeadlineExceeded", i, err)
		}
	}
	if got := f.requestsFor(1); got != 0 {
		t.Fatalf("%d single-ID requests sent while refills were in flight, want none", got)
	}
	unblock()
	if _, err := c.Next(context.Background()); err != nil {
		t.Fatalf("Next after the refill answered: %v", err)
	}
}

func TestConfigAndClose(t *testing.T) {
	for _, cfg := range []Config{
		{},
		{Servers: []string{"a:1"}, Discovery: Static{"b:1"}},
		{Servers: []string{"nohost"}},
		{Servers: []string{"a:1"}, MaxBatch: -1},
		{Servers: []string{"a:1"}, Timeout: -time.Second},
		{Servers: []string{"a:1"}, StallAfter: -time.Millisecond},
		{Servers: []string{"a:1"}, MaxInFlight: 2000},
	} {
		if _, err := New(context.Background(), cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("New(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
	f := startFake(t, 1, nil)
	c, err := New(context.Background(), Config{Servers: []string{f.addr}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.NextN(context.Background(), 0); !errors.Is(err, ErrRejected) {
		t.Fatalf("NextN(0): %v", err)
	}
	if ids, err := c.NextN(context.Background(), 2500); err != nil || len(ids) != 2500 {
		t.Fatalf("NextN(2500) over MaxBatch 1000: %d IDs, %v", len(ids), err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Next(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

// A batch out longer than StallAfter gives its in-flight slot up: a caller
// arriving while the only slot waits on a node that hangs is served by the
// next node at once, instead of waiting behind it for Timeout.
func TestStalledBatchFreesItsSlot(t *testing.T) {
	for _, tc := range []struct {
		name       string
		stallAfter time.Duration
		wantServed bool
	}{
		{"stall after 50ms: second caller served", 50 * time.Millisecond, true},
		{"stall after 1m: second caller waits behind the hung batch", time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			var once sync.Once
			unhang := func() { once.Do(func() { close(release) }) }
			t.Cleanup(unhang)
			hang := startFake(t, 1, hangUntil(release))
			good := startFake(t, 2, nil)
			c := newClient(t, Config{Servers: []string{hang.addr, good.addr}, MaxInFlight: 1,
				Timeout: 5 * time.Second, StallAfter: tc.stallAfter})
			first := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_, err := c.Next(ctx)
				first <- err
			}()
			for i := 0; hang.requests.Load() == 0; i++ {
				if i == 500 {
					t.Fatal("the first batch never reached the hanging node")
				}
				time.Sleep(10 * time.Millisecond)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, err := c.Next(ctx)
			if served := err == nil; served != tc.wantServed {
				t.Fatalf("second caller: err %v, want served %v", err, tc.wantServed)
			}
			if !tc.wantServed && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("second caller: err %v, want context.DeadlineExceeded", err)
			}
			unhang()
			if err := <-first; err != nil {
				t.Fatalf("first caller, once the node answers: %v", err)
			}
		})
	}
}

// Close fails the calls queued and in flight with ErrClosed at once, even
// on a node that never answers, and leaves no connection open.
func TestCloseFailsQueuedAndInFlightCalls(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	hang := startFake(t, 1, hangUntil(release))
	c, err := New(context.Background(), Config{Servers: []string{hang.addr}, MaxInFlight: 1, StallAfter: time.Minute, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	next := func() { _, err := c.Next(context.Background()); errs <- err }
	go next()
	eventually(t, "the first call reaches the node", func() bool { return hang.requests.Load() == 1 })
	go next() // queued behind the call in flight
	eventually(t, "the second call queues", func() bool { return c.ids.waiting() == 1 })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-errs; !errors.Is(err, ErrClosed) {
			t.Fatalf("call: %v, want ErrClosed", err)
		}
	}
	if n := c.pool.conns(); n != 0 {
		t.Fatalf("%d connections open after Close", n)
	}
	eventually(t, "the node sees the connection closed", func() bool { return hang.conns.Load() == 0 })
}

// Config.Log gets a line per failover through log/slog, naming the node
// and its error; a nil Log discards.
func TestLogThroughSlog(t *testing.T) {
	tests := []struct {
		name string
		log  func(*bytes.Buffer) *slog.Logger
		want []string
	}{
		{"slog", func(b *bytes.Buffer) *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }, []string{"level=WARN", "failing over", "node=", "refused"}},
		{"nil discards", func(*bytes.Buffer) *slog.Logger { return nil }, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			bad := closedAddr(t)
			good := startFake(t, 1, nil)
			c := newClient(t, Config{Servers: []string{bad, good.addr}, Log: tc.log(&buf)})
			if _, err := c.NextN(context.Background(), 2); err != nil {
				t.Fatal(err)
			}
			got := buf.String()
			if tc.want == nil && got != "" {
				t.Fatalf("logged %q, want nothing", got)
			}
			for _, w := range append(tc.want, bad) {
				if tc.want != nil && !strings.Contains(got, w) {
					t.Errorf("log %q does not contain %q", got, w)
				}
			}
		})
	}
}
