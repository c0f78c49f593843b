package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"
)

// BenchmarkServeID is GET /id end to end through fasthttp's connection
// handling (request parsing, response writing, keep-alive) on an in-memory
// listener, beside a bare fasthttp server configured like
// tests/bench/barehttp (the `make bench` baseline) in the same run: the
// ratio of the two ns/op is what the node's own work costs per request,
// without the kernel's share that wrk against real sockets adds. Each
// connection pipelines batches of requests, so the client's share is small.
//
//	go test -run '^$' -bench 'ServeID' -benchmem -cpu 1 ./server/
func BenchmarkServeID(b *testing.B) {
	body := []byte("123456789012345678")
	bare := &fasthttp.Server{
		Name:        "barehttp",
		ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, IdleTimeout: 60 * time.Second,
		Handler: func(ctx *fasthttp.RequestCtx) {
			ctx.SetContentType("text/plain; charset=utf-8")
			ctx.SetBody(body)
		},
	}
	b.Run("server=bare", func(b *testing.B) { benchServe(b, bareServer{bare}, nil) })
	for _, l := range benchLayouts {
		b.Run("server=node/"+l.name, func(b *testing.B) {
			obs := &countingObserver{}
			f := newFixture(b, l.layout, func(c *Config) { c.Observer = obs })
			benchServe(b, f.srv, obs)
		})
	}
}

// bareServer gives a fasthttp.Server the Shutdown of servable.
type bareServer struct{ *fasthttp.Server }

func (s bareServer) Shutdown(ctx context.Context) error { return s.ShutdownWithContext(ctx) }

// benchServe serves s on an in-memory listener and sends b.N GET /id over
// benchConns connections, benchPipeline requests in flight on each; every
// response must be a 200.
func benchServe(b *testing.B, s servable, obs *countingObserver) {
	b.Helper()
	const benchConns, benchPipeline = 8, 16
	ln := fasthttputil.NewInmemoryListener()
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			b.Errorf("shutdown: %v", err)
		}
		_ = ln.Close()
		if err := <-done; err != nil {
			b.Errorf("serve: %v", err)
		}
	})
	conns := make([]net.Conn, benchConns)
	for i := range conns {
		c, err := ln.Dial()
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close() })
		conns[i] = c
		if err := roundTrips(c, benchPipeline); err != nil { // warm up
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	errs := make(chan error, benchConns)
	for i, c := range conns {
		n := b.N / benchConns
		if i < b.N%benchConns {
			n++
		}
		wg.Go(func() {
			if err := roundTrips(c, n); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	if obs != nil && obs.issued.Load() < int64(b.N) {
		b.Fatalf("%d IDs issued for %d requests", obs.issued.Load(), b.N)
	}
}

var (
	benchRequest  = []byte("GET /id HTTP/1.1\r\nHost: bench\r\nUser-Agent: bench\r\n\r\n")
	benchResponse = []byte("HTTP/1.1 200 OK\r\n")
)

// roundTrips sends n GET /id on c, at most benchPipeline in flight, and
// reads the responses, counting their status lines; a response other than
// a 200 is never counted, so the read deadline ends the wait for it.
func roundTrips(c net.Conn, n int) error {
	const benchPipeline = 16
	if err := c.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		return err
	}
	reqs := bytes.Repeat(benchRequest, benchPipeline)
	buf := make([]byte, 64<<10)
	carry := 0 // bytes kept from the last read: a status line split across reads
	for n > 0 {
		k := min(n, benchPipeline)
		if _, err := c.Write(reqs[:k*len(benchRequest)]); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		for got := 0; got < k; {
			m, err := c.Read(buf[carry:])
			if err != nil {
				return fmt.Errorf("read after %d of %d responses: %w", got, k, err)
			}
			data := buf[:carry+m]
			got += bytes.Count(data, benchResponse)
			carry = min(len(data), len(benchResponse)-1)
			copy(buf, data[len(data)-carry:])
			if got > k {
				return fmt.Errorf("%d responses to %d requests: %w", got, k, io.ErrUnexpectedEOF)
			}
		}
		n -= k
	}
	return nil
}
