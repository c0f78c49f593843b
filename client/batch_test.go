package client

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// goid is the running goroutine's number, from its stack header.
func goid() int64 {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	f := bytes.Fields(buf)
	id, _ := strconv.ParseInt(string(f[1]), 10, 64)
	return id
}

// A call alone makes its request on its own goroutine: no hand-off to
// another goroutine and back (each costs a wake-up, measured at 20-40µs of
// latency on a 2-core machine).
func TestUncontendedCallMakesItsOwnRequest(t *testing.T) {
	f := startFake(t, 1, nil)
	var requestOn atomic.Int64
	c := newClient(t, Config{Servers: []string{f.addr}, Hooks: Hooks{
		Request: func(RequestEvent) { requestOn.Store(goid()) },
	}})
	for i := range 3 {
		if _, err := c.Next(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got, want := requestOn.Load(), goid(); got != want {
			t.Fatalf("call %d: the request ran on goroutine %d, the caller is %d", i, got, want)
		}
	}
}

// More calls in flight than a connection pool would allow are all served
// by one healthy node: connections are not rationed, so no call fails
// and the node is never marked down for it.
func TestManyInFlightOnOneHealthyNode(t *testing.T) {
	f := startFake(t, 1, func(http.ResponseWriter, *http.Request, int) bool {
		time.Sleep(20 * time.Millisecond)
		return false
	})
	c := newClient(t, Config{Servers: []string{f.addr}, MaxInFlight: 128, StallAfter: time.Millisecond})
	const callers = 200
	var wg sync.WaitGroup
	var failed atomic.Int64
	var firstErr atomic.Value
	for range callers {
		wg.Go(func() {
			if _, err := c.Next(context.Background()); err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err.Error())
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d of %d calls failed on a healthy node; first: %v", n, callers, firstErr.Load())
	}
	if st := c.Stats(); st.Failovers != 0 || st.IDs != callers {
		t.Fatalf("stats %+v", st)
	}
}

// NextN above MaxBatch is served in several batches, from several nodes
// whose IDs interleave, and still returns increasing IDs.
func TestNextNAboveMaxBatchIncreases(t *testing.T) {
	hi, lo := startFake(t, 5, nil), startFake(t, 1, nil) // hi's IDs are all above lo's
	c := newClient(t, Config{Servers: []string{hi.addr, lo.addr}, MaxBatch: 10})
	for _, n := range []int{25, 10, 11} {
		ids, err := c.NextN(context.Background(), n)
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) != n {
			t.Fatalf("NextN(%d): %d IDs", n, len(ids))
		}
		for i := 1; i < len(ids); i++ {
			if ids[i] <= ids[i-1] {
				t.Fatalf("NextN(%d): %d after %d", n, ids[i], ids[i-1])
			}
		}
	}
	if hi.requests.Load() == 0 || lo.requests.Load() == 0 {
		t.Fatalf("requests: hi %d, lo %d; want both nodes used", hi.requests.Load(), lo.requests.Load())
	}
}

// Close leaves nothing behind: no goroutine of the client and no
// connection, with keep-alive connections open before.
func TestCloseLeavesNothing(t *testing.T) {
	f := startFake(t, 1, nil)
	before := runtime.NumGoroutine()
	c, err := New(context.Background(), Config{Servers: []string{f.addr}, Prefetch: 100, MaxInFlight: 4})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 50 {
				if _, err := c.NextN(context.Background(), 2); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if f.conns.Load() == 0 {
		t.Fatal("no connection open before Close")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n := c.pool.conns(); n != 0 {
		t.Fatalf("%d connections open after Close", n)
	}
	eventually(t, "the node sees every connection closed", func() bool { return f.conns.Load() == 0 })
	// The node's own goroutines for those connections end with them.
	eventually(t, "goroutines back to their number before New", func() bool { return runtime.NumGoroutine() <= before })
}

// What each answer means for the node that gave it.
func TestAnswerClassification(t *testing.T) {
	errBody := func(status int, code string) func(http.ResponseWriter, *http.Request, int) bool {
		return func(w http.ResponseWriter, _ *http.Request, _ int) bool {
			writeBody(w, status, `{"error":{"code":"`+code+`","message":"m"}}`)
			return true
		}
	}
	tests := []struct {
		name      string
		behave    func(http.ResponseWriter, *http.Request, int) bool
		segment   bool
		rejected  bool // the call fails with ErrRejected, no other node asked
		down      bool // the node gets no more calls of that kind
		idsStayUp bool // after a segment failure, its snowflake IDs are still asked for
	}{
		{name: "503 batch_timeout: the request's doing, node stays up", behave: errBody(503, "batch_timeout")},
		{name: "503 out_of_service: down", behave: errBody(503, "out_of_service"), down: true},
		{name: "404 not_found: a stale address, down", behave: errBody(404, "not_found"), down: true},
		{name: "404 from another program: down", behave: func(w http.ResponseWriter, _ *http.Request, _ int) bool {
			writeBody(w, 404, "<html>Not Found</html>")
			return true
		}, down: true},
		{name: "400: rejected", behave: errBody(400, "invalid_count"), rejected: true},
		{name: "segment 404 unknown_tag: rejected", behave: errBody(404, "unknown_tag"), segment: true, rejected: true},
		{name: "segment 404 segments_off: down for segments only", behave: errBody(404, "segments_off"), segment: true, down: true, idsStayUp: true},
		{name: "segment 503 segment_unavailable: down for segments only", behave: errBody(503, "segment_unavailable"), segment: true, down: true, idsStayUp: true},
		{name: "segment 503 tokens_unconfirmed: down for segments only", behave: errBody(503, "tokens_unconfirmed"), segment: true, down: true, idsStayUp: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var failing atomic.Bool
			failing.Store(true)
			bad := startFake(t, 1, func(w http.ResponseWriter, r *http.Request, n int) bool {
				return failing.Load() && tc.behave(w, r, n)
			})
			good := startFake(t, 2, nil)
			c := newClient(t, Config{Servers: []string{bad.addr, good.addr}, DownFor: time.Minute})
			call := func() error {
				if tc.segment {
					_, err := c.NextSegment(context.Background(), "orders")
					return err
				}
				_, err := c.Next(context.Background())
				return err
			}
			err := call()
			if tc.rejected {
				if !errors.Is(err, ErrRejected) || good.requests.Load() != 0 {
					t.Fatalf("err %v, good node asked %d times; want ErrRejected and no other node", err, good.requests.Load())
				}
				return
			}
			if err != nil || good.requests.Load() != 1 || bad.requests.Load() != 1 {
				t.Fatalf("err %v, requests bad %d good %d: want a failover to the good node", err, bad.requests.Load(), good.requests.Load())
			}
			failing.Store(false)
			for range 4 { // round robin would reach bad twice
				if err := call(); err != nil {
					t.Fatal(err)
				}
			}
			if asked := bad.requests.Load() > 1; asked == tc.down {
				t.Fatalf("bad node asked %d times after its failure; want down=%v", bad.requests.Load(), tc.down)
			}
			if tc.idsStayUp {
				before := bad.requests.Load()
				for range 2 {
					if _, err := c.Next(context.Background()); err != nil {
						t.Fatal(err)
					}
				}
				if bad.requests.Load() == before {
					t.Fatal("a segment failure took the node out for snowflake IDs too")
				}
			}
		})
	}
}

// NextSegment merges concurrent calls of one tag into /segment/{tag}
// batches, keeps tags apart, hands every ID out once, and refuses a bad
// tag without a request.
func TestNextSegment(t *testing.T) {
	var mu sync.Mutex
	paths := map[string]int{}
	f := startFake(t, 1, func(_ http.ResponseWriter, r *http.Request, _ int) bool {
		time.Sleep(time.Millisecond)
		mu.Lock()
		paths[r.URL.Path]++
		mu.Unlock()
		return false
	})
	c := newClient(t, Config{Servers: []string{f.addr}})
	const goroutines, each = 32, 50
	got := callConcurrently(t, goroutines, each, func(g int) (int64, error) {
		return c.NextSegment(context.Background(), []string{"orders", "users"}[g%2])
	})
	all := slices.Concat(got...)
	slices.Sort(all)
	if len(slices.Compact(all)) != goroutines*each {
		t.Fatalf("%d distinct IDs, want %d", len(slices.Compact(all)), goroutines*each)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(paths) != 2 || paths["/segment/orders"] == 0 || paths["/segment/users"] == 0 {
		t.Fatalf("paths %v", paths)
	}
	if r := f.requests.Load(); r*3 > goroutines*each {
		t.Fatalf("%d requests for %d calls: not merged", r, goroutines*each)
	}
	before := f.requests.Load()
	for _, tag := range []string{"", "a/b", "a b", "..", strings.Repeat("x", MaxTagLen+1), "a\x00b", "a%2f"} {
		if _, err := c.NextSegment(context.Background(), tag); !errors.Is(err, ErrRejected) {
			t.Errorf("tag %q: %v, want ErrRejected", tag, err)
		}
	}
	if f.requests.Load() != before {
		t.Fatal("a bad tag reached the node")
	}
}

// BenchmarkWakeCallers is the floor under any client that merges calls:
// 64 goroutines each queue and park until one goroutine hands them an ID,
// with no network at all. It measures the Go scheduler on this machine
// (ns per ID handed out), not the client.
func BenchmarkWakeCallers(b *testing.B) {
	var mu sync.Mutex
	var queue []chan int64
	kick := make(chan struct{}, 1)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var id int64
		for {
			select {
			case <-kick:
			case <-stop:
				return
			}
			mu.Lock()
			q := queue
			queue = nil
			mu.Unlock()
			for _, ch := range q {
				id++
				ch <- id
			}
		}
	}()
	b.SetParallelism(max(64/runtime.GOMAXPROCS(0), 1))
	b.RunParallel(func(pb *testing.PB) {
		ch := make(chan int64, 1)
		for pb.Next() {
			mu.Lock()
			queue = append(queue, ch)
			mu.Unlock()
			select {
			case kick <- struct{}{}:
			default:
			}
			<-ch
		}
	})
	close(stop)
	<-done
}

// joinedOpen is the number of calls joined to b's open batch, read without
// b.mu.
func joinedOpen(b *batcher) int {
	bt := b.open.Load()
	if bt == nil {
		return 0
	}
	return int(bt.state.Load() &^ batchSealed >> 32)
}

// Calls that arrive while every slot is taken join the open batch without
// b.mu: with the lock held elsewhere, they still join, and the batch then
// serves them all in one request, each its own IDs.
func TestCallsJoinTheOpenBatchWithoutTheLock(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	unhang := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unhang)
	f := startFake(t, 1, hangUntil(release))
	c := newClient(t, Config{Servers: []string{f.addr}, MaxInFlight: 1, StallAfter: time.Hour, Timeout: time.Minute})
	const joiners = 8
	got := make(chan []int64, joiners+2)
	errs := make(chan error, joiners+2)
	call := func() {
		ids, err := c.NextN(context.Background(), 2)
		errs <- err
		got <- ids
	}
	go call()
	eventually(t, "the first call reaches the node", func() bool { return f.requests.Load() == 1 })
	go call()
	eventually(t, "the second call opens a batch", func() bool { return c.ids.waiting() == 1 })
	c.ids.mu.Lock()
	for range joiners {
		go call()
	}
	joined := false
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if joined = joinedOpen(c.ids) == joiners+1; joined {
			break
		}
	}
	c.ids.mu.Unlock()
	if !joined {
		t.Fatalf("%d calls joined the open batch while b.mu was held, want %d", joinedOpen(c.ids), joiners+1)
	}
	unhang()
	var all []int64
	for range joiners + 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		ids := <-got
		if len(ids) != 2 || ids[1] <= ids[0] {
			t.Fatalf("a call got %v, want 2 increasing IDs", ids)
		}
		all = append(all, ids...)
	}
	slices.Sort(all)
	if len(slices.Compact(all)) != 2*(joiners+2) {
		t.Fatalf("IDs %v: some handed out twice", all)
	}
	if r := f.requests.Load(); r != 2 {
		t.Fatalf("%d requests, want 2: the first call's and one batch", r)
	}
}

// With one request in flight, the callers a batch just served join the
// next batch together: the batch's goroutine waits for them (no yield, no
// timer) instead of leaving with whoever was waiting, so the callers do
// not split into two groups taking turns with half-size batches.
func TestServedCallersJoinTheNextBatchTogether(t *testing.T) {
	f := startFake(t, 1, func(http.ResponseWriter, *http.Request, int) bool {
		time.Sleep(time.Millisecond)
		return false
	})
	c := newClient(t, Config{Servers: []string{f.addr}, MaxInFlight: 1})
	const callers, each = 16, 30
	got := callConcurrently(t, callers, each, func(int) (int64, error) { return c.Next(context.Background()) })
	all := slices.Concat(got...)
	slices.Sort(all)
	if len(slices.Compact(all)) != callers*each {
		t.Fatalf("%d distinct IDs, want %d", len(slices.Compact(all)), callers*each)
	}
	// Two groups taking turns average callers/2 a request; together, close
	// to callers.
	if r := f.requests.Load(); float64(callers*each)/float64(r) < 0.75*callers {
		t.Fatalf("%d requests for %d calls of %d callers: %.1f a request, want at least %.0f",
			r, callers*each, callers, float64(callers*each)/float64(r), 0.75*callers)
	}
}

// A batch whose callers all gave up during its request is not sent on to
// another node when that request fails: nobody waits for its IDs.
func TestBatchWithoutCallersDoesNotFailOver(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	h1, h2 := startFake(t, 1, hangUntil(release)), startFake(t, 2, hangUntil(release))
	good := startFake(t, 3, nil) // where a failover would go
	c := newClient(t, Config{Servers: []string{h1.addr, h2.addr, good.addr}, MaxInFlight: 1, StallAfter: 20 * time.Millisecond, Timeout: 200 * time.Millisecond})
	errs := make(chan error, 2)
	call := func(ctx context.Context) {
		_, err := c.Next(ctx)
		errs <- err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go call(ctx) // alone, on one node; it stalls and gives its slot up
	eventually(t, "the first call reaches a node", func() bool { return h1.requests.Load()+h2.requests.Load() == 1 })
	go call(ctx) // a batch, on the other node once the first stalls
	eventually(t, "the batch reaches the other node", func() bool { return h1.requests.Load() == 1 && h2.requests.Load() == 1 })
	cancel()
	for range 2 {
		if err := <-errs; !errors.Is(err, context.Canceled) {
			t.Fatalf("call: %v, want context.Canceled", err)
		}
	}
	eventually(t, "both requests end", func() bool {
		c.ids.mu.Lock()
		defer c.ids.mu.Unlock()
		return len(c.ids.slots) == 0
	})
	if r1, r2, g := h1.requests.Load(), h2.requests.Load(), good.requests.Load(); r1 != 1 || r2 != 1 || g != 0 {
		t.Fatalf("requests %d, %d and %d after every caller gave up, want 1, 1 and none to the good node", r1, r2, g)
	}
}
