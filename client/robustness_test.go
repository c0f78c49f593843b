package client

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// oneAnswerPerConn is a raw node that answers one request per connection
// and then closes it without saying so (as a restarting node does to its
// idle keep-alive connections). wait, if set, holds the first answers until
// that many requests are out together.
func oneAnswerPerConn(t *testing.T, together int) *rawNode {
	t.Helper()
	var seq atomic.Int64
	var arrived sync.WaitGroup
	arrived.Add(together)
	return startRaw(t, func(w io.Writer) error {
		id := seq.Add(1)
		if id <= int64(together) {
			arrived.Done()
			arrived.Wait()
		}
		body := strconv.FormatInt(id, 10) + "\n"
		if _, err := io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body); err != nil {
			return err
		}
		return errors.New("close after one answer")
	})
}

// Every idle connection closed by the node (a restart): the next call is
// served on a newly dialled connection, not on the next dead idle one,
// and the node stays in rotation.
func TestIdleConnectionsClosedByTheNodeAreReplaced(t *testing.T) {
	node := oneAnswerPerConn(t, 2)
	c := newClient(t, Config{Servers: []string{node.addr}, MaxInFlight: 2})
	var wg sync.WaitGroup
	for range 2 { // two connections, both idle afterwards
		wg.Go(func() {
			if _, err := c.Next(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	eventually(t, "the node closes both", func() bool { return node.conns.Load() == 2 && c.pool.conns() >= 1 })
	for i := range 3 {
		if _, err := c.Next(context.Background()); err != nil {
			t.Fatalf("call %d after the node closed its idle connections: %v", i, err)
		}
	}
	if st := c.Stats(); st.Failovers != 0 || st.Errors != 0 {
		t.Fatalf("stats %+v: want no failover and no error", st)
	}
}

// A caller's own short deadline is not the node's fault: the node stays in
// rotation, and no failover is counted.
func TestCallersDeadlineDoesNotMarkTheNodeDown(t *testing.T) {
	f := startFake(t, 1, func(http.ResponseWriter, *http.Request, int) bool {
		time.Sleep(20 * time.Millisecond)
		return false
	})
	c := newClient(t, Config{Servers: []string{f.addr}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	if _, err := c.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("impatient call: %v, want context.DeadlineExceeded", err)
	}
	if _, err := c.Next(context.Background()); err != nil {
		t.Fatalf("the next call: %v", err)
	}
	if st := c.Stats(); st.Failovers != 0 {
		t.Fatalf("stats %+v: a caller's deadline counted as a failover", st)
	}
}

// blackhole is a loopback address whose accept queue is full: a dial to it
// hangs (the kernel drops the SYN).
func blackhole(t *testing.T) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("needs Linux's backlog behaviour")
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
	for i := 0; ; i++ { // fill the queue
		nc, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return addr
		}
		t.Cleanup(func() { nc.Close() })
		if i > 10 {
			t.Fatal("the accept queue does not fill")
		}
	}
}

// Close does not wait for a dial in progress: a node that drops SYNs and a
// 10s Timeout, and Close still returns at once, calls failing ErrClosed.
func TestCloseAbortsDialsInProgress(t *testing.T) {
	addr := blackhole(t)
	c, err := New(context.Background(), Config{Servers: []string{addr}, Timeout: 10 * time.Second, Prefetch: 100})
	if err != nil {
		t.Fatal(err)
	}
	call := make(chan error, 1)
	go func() { _, err := c.NextN(context.Background(), 2); call <- err }()
	eventually(t, "a call is dialling", func() bool {
		c.ids.mu.Lock()
		defer c.ids.mu.Unlock()
		return len(c.ids.slots) > 0
	})
	closed := make(chan struct{})
	go func() { _ = c.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close waits for a dial that hangs")
	}
	if err := <-call; !errors.Is(err, ErrClosed) {
		t.Fatalf("the call dialling: %v, want ErrClosed", err)
	}
}

// Once closed, nothing is handed out, not even a prefetched ID, and no new
// tag gets a batcher.
func TestNothingAfterClose(t *testing.T) {
	f := startFake(t, 1, nil)
	c := newClient(t, Config{Servers: []string{f.addr}, Prefetch: 100})
	eventually(t, "the buffer fills", func() bool { return c.pre.cur.Load() != nil })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if id, err := c.Next(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close: %d, %v; want ErrClosed", id, err)
	}
	if _, err := c.NextSegment(context.Background(), "new-tag"); !errors.Is(err, ErrClosed) {
		t.Fatalf("NextSegment after Close: %v; want ErrClosed", err)
	}
}

// A node that leaves the list (discovery, a new pod address) takes its
// idle connections with it.
func TestIdleConnectionsToADepartedNodeAreClosed(t *testing.T) {
	a, b := startFake(t, 1, nil), startFake(t, 2, nil)
	c := newClient(t, Config{Servers: []string{a.addr}})
	if _, err := c.Next(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.setNodes([]string{b.addr})
	eventually(t, "a sees its connection closed", func() bool { return a.conns.Load() == 0 })
	if _, err := c.Next(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := c.pool.conns(); n != 1 {
		t.Fatalf("%d connections open, want b's alone", n)
	}
}

// Bytes a peer sends beyond an answer are never read as the next answer:
// the connection is closed instead of reused.
func TestBytesBeyondAnAnswerAreNotTheNextAnswer(t *testing.T) {
	var seq atomic.Int64
	node := startRaw(t, func(w io.Writer) error {
		body := strconv.FormatInt(seq.Add(1), 10) + "\n"
		ans := "HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
		_, err := io.WriteString(w, ans+ans) // the same answer twice
		return err
	})
	c := newClient(t, Config{Servers: []string{node.addr}})
	var last int64
	for i := range 3 {
		id, err := c.Next(context.Background())
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if id <= last {
			t.Fatalf("call %d got %d after %d: a stale answer was read", i, id, last)
		}
		last = id
	}
}

// Many callers with random deadlines and cancellations, nodes that
// sometimes stall past StallAfter, small batches, calls above MaxBatch,
// with and without prefetch: every ID once, each call's IDs increasing, no
// call far past its deadline, Close prompt.
func TestStressUnderCancellationsAndStalls(t *testing.T) {
	delay := func(http.ResponseWriter, *http.Request, int) bool {
		switch x := rand.IntN(100); {
		case x < 5:
			time.Sleep(30 * time.Millisecond)
		case x < 20:
			time.Sleep(time.Millisecond)
		}
		return false
	}
	a, b := startFake(t, 1, delay), startFake(t, 2, delay)
	for _, pre := range []int{0, 64} {
		for inFlight := 1; inFlight <= 3; inFlight += 2 {
			c, err := New(context.Background(), Config{Servers: []string{a.addr, b.addr}, MaxBatch: 7, MaxInFlight: inFlight,
				StallAfter: 2 * time.Millisecond, Prefetch: pre, Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			seen := map[int64]bool{}
			var wg sync.WaitGroup
			const calls = 150
			for g := range 32 {
				wg.Go(func() {
					for range calls {
						ctx, cancel := context.Background(), context.CancelFunc(func() {})
						limit := 3 * time.Second // Attempts x Timeout, and slack
						switch rand.IntN(3) {
						case 0:
							ctx, cancel = context.WithTimeout(ctx, time.Duration(rand.IntN(5000))*time.Microsecond)
							limit = time.Second
						case 1:
							ctx, cancel = context.WithCancel(ctx)
							time.AfterFunc(time.Duration(rand.IntN(3000))*time.Microsecond, cancel)
						}
						n := 1
						if g%4 == 0 {
							n = 1 + rand.IntN(20)
						}
						start := time.Now()
						ids, err := c.NextN(ctx, n)
						if g%2 == 1 && n == 1 && err == nil {
							var id int64
							id, err = c.Next(ctx)
							ids = append(ids[:0], id)
						}
						if d := time.Since(start); d > limit {
							t.Errorf("a call took %v", d)
						}
						cancel()
						if err != nil {
							continue
						}
						mu.Lock()
						for i, id := range ids {
							if seen[id] {
								t.Errorf("ID %d handed out twice", id)
							}
							seen[id] = true
							if i > 0 && id <= ids[i-1] {
								t.Errorf("a call's IDs not increasing: %d after %d", id, ids[i-1])
							}
						}
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			start := time.Now()
			_ = c.Close()
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("Close took %v", d)
			}
			t.Logf("prefetch %d, in flight %d: %d IDs, stats %+v", pre, inFlight, len(seen), c.Stats())
		}
	}
}
