package client

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// startIDServer is a minimal in-process node for benchmarks: it answers
// each GET ...count=N on a keep-alive connection with N increasing IDs, and
// nothing else, so that the figures are the client's and the loopback's.
func startIDServer(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	tb.Cleanup(func() { ln.Close(); wg.Wait() })
	var mu sync.Mutex
	var conns []net.Conn
	tb.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { serveIDs(c, &next) })
		}
	})
	return ln.Addr().String()
}

// serveIDs answers the requests of one connection until it closes.
func serveIDs(c net.Conn, next *atomic.Int64) {
	defer c.Close()
	r := bufio.NewReader(c)
	var body, out []byte
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return
		}
		n := 1
		if _, q, ok := bytes.Cut(line, []byte("count=")); ok {
			q, _, _ = bytes.Cut(q, []byte(" "))
			if n, err = strconv.Atoi(string(q)); err != nil || n < 1 {
				return
			}
		}
		for { // the headers, up to the empty line
			l, err := r.ReadSlice('\n')
			if err != nil {
				return
			}
			if len(bytes.TrimSpace(l)) == 0 {
				break
			}
		}
		first := next.Add(int64(n)) - int64(n) + 1
		body = body[:0]
		for id := first; id < first+int64(n); id++ {
			body = strconv.AppendInt(body, id, 10)
			body = append(body, '\n')
		}
		out = append(out[:0], "HTTP/1.1 200 OK\r\nContent-Length: "...)
		out = strconv.AppendInt(out, int64(len(body)), 10)
		out = append(out, "\r\n\r\n"...)
		out = append(out, body...)
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

// BenchmarkNextParallel: Next from 1 and from 64 goroutines against an
// in-process node over loopback (ns per ID handed out, IDs per request).
// With 64 callers the mutex profile shows what the callers contend on:
//
//	go test -run '^$' -bench 'NextParallel/callers=64' -mutexprofile m.out . && go tool pprof -top m.out
func BenchmarkNextParallel(b *testing.B) {
	addr := startIDServer(b)
	for _, callers := range []int{1, 64} {
		b.Run("callers="+strconv.Itoa(callers), func(b *testing.B) {
			c, err := New(context.Background(), Config{Servers: []string{addr}})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			benchNext(b, c, callers)
		})
	}
}
