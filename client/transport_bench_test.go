package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkTransport compares the client's own HTTP/1.1 (the product)
// with net/http (httpTransport, below) on the same calls against the same
// in-process node over loopback: Next from one goroutine (the cost of a
// call); from 64 goroutines without prefetch and the default MaxInFlight
// (calls merged into batches: the 64-caller throughput); and from 64
// goroutines with 64 requests in flight (one request a call). Alternate
// rounds, e.g.
//
//	go test -c -o client.test . && for r in 1 2 3 4 5; do ./client.test -test.run '^$' -test.bench Transport -test.cpu 2; done
//
// and compare the medians of ns/op and ids/s of own and nethttp.
func BenchmarkTransport(b *testing.B) {
	addr := startIDServer(b)
	transports := []struct {
		name string
		make func(Config) transport
	}{
		{"own", func(cfg Config) transport { return newPool(cfg.MaxInFlight+prefetchDepth+2, cfg.TLS) }},
		{"nethttp", func(cfg Config) transport { return newHTTPTransport(cfg.MaxInFlight+prefetchDepth+2, cfg.TLS) }},
	}
	for _, mode := range []struct {
		name              string
		callers, inFlight int
	}{{"callers=1", 1, 0}, {"callers=64", 64, 0}, {"callers=64/inflight=64", 64, 64}} {
		for _, tr := range transports {
			b.Run(mode.name+"/"+tr.name, func(b *testing.B) {
				c, err := New(context.Background(), Config{Servers: []string{addr}, MaxInFlight: mode.inFlight})
				if err != nil {
					b.Fatal(err)
				}
				c.pool.close()
				c.pool = tr.make(c.cfg)
				defer c.Close()
				benchNext(b, c, mode.callers)
			})
		}
	}
}

// benchNext makes b.N calls of Next from callers goroutines.
func benchNext(b *testing.B, c *Client, callers int) {
	b.Helper()
	ctx := context.Background()
	if _, err := c.Next(ctx); err != nil { // the connection, dialled
		b.Fatal(err)
	}
	before := c.Stats()
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	for range callers {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if _, err := c.Next(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	st := c.Stats()
	if r := st.Requests - before.Requests; r > 0 {
		b.ReportMetric(float64(st.IDs-before.IDs)/float64(r), "ids/request")
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ids/s")
}

// httpTransport is the client's transport done with net/http, for the
// benchmark: one http.Transport (keep-alive, MaxIdleConnsPerHost as the
// own pool's idle connections, ProxyFromEnvironment, answers with a
// Content-Length or chunked), read with a bounded reader into pooled
// buffers. Its dialer keeps every connection, so that close closes them
// all at once, as the own pool does.
type httpTransport struct {
	tr     *http.Transport
	scheme string // "http" or "https"
	ctx    context.Context
	cancel context.CancelFunc // ends requests and dials in progress on close

	mu     sync.Mutex
	open   map[*trackedConn]struct{}
	closed bool
}

// newHTTPTransport returns a net/http transport that speaks plain HTTP,
// or HTTPS with tlsCfg when it is not nil.
func newHTTPTransport(maxIdle int, tlsCfg *tls.Config) *httpTransport {
	ctx, cancel := context.WithCancel(context.Background())
	t := &httpTransport{scheme: "http", ctx: ctx, cancel: cancel, open: map[*trackedConn]struct{}{}}
	var d net.Dialer
	t.tr = &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			nc, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return t.track(nc)
		},
		TLSClientConfig:        tlsCfg,
		MaxIdleConnsPerHost:    maxIdle,
		IdleConnTimeout:        maxIdleAge,
		MaxResponseHeaderBytes: maxHeaderBytes,
		DisableCompression:     true,
	}
	if tlsCfg != nil {
		t.scheme = "https"
	}
	return t
}

// trackedConn is a connection the transport opened, forgotten once closed.
type trackedConn struct {
	net.Conn
	t    *httpTransport
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.t.mu.Lock()
		delete(c.t.open, c)
		c.t.mu.Unlock()
	})
	return c.Conn.Close()
}

// track registers a new connection, or closes it when the transport is
// closed.
func (t *httpTransport) track(nc net.Conn) (net.Conn, error) {
	c := &trackedConn{Conn: nc, t: t}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		_ = nc.Close()
		return nil, ErrClosed
	}
	t.open[c] = struct{}{}
	return c, nil
}

func (t *httpTransport) roundTrip(addr, path, header string, deadline time.Time, maxBody int, use func(answer) error) error {
	ctx, cancel := context.WithDeadline(t.ctx, deadline)
	defer cancel()
	u := &url.URL{Scheme: t.scheme, Host: addr}
	u.Path, u.RawQuery, _ = strings.Cut(path, "?")
	req := (&http.Request{Method: http.MethodGet, URL: u, Host: addr, Header: requestHeader(header),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}).WithContext(ctx)
	resp, err := t.tr.RoundTrip(req)
	if err != nil {
		if t.conns() == 0 && ctx.Err() != nil && t.ctx.Err() != nil {
			return ErrClosed
		}
		return err
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 && s < 3600 {
		a.retryAfter = time.Duration(s) * time.Second
	}
	limit := maxBody
	if a.status != http.StatusOK {
		limit = maxErrorBody
	}
	if resp.ContentLength > int64(limit) {
		return fmt.Errorf("%w: a body of %d bytes, more than the %d expected at most", errAnswer, resp.ContentLength, limit)
	}
	buf := getBuf(resp.ContentLength, limit)
	defer bufs.Put(buf)
	if a.body, err = readBounded(resp.Body, (*buf)[:0], limit); err != nil {
		return err
	}
	return use(a)
}

// requestHeader turns header lines ("Name: value\r\n" each) into a Header.
func requestHeader(lines string) http.Header {
	h := http.Header{"User-Agent": {"snowflaked-client"}}
	for line := range strings.SplitSeq(lines, "\r\n") {
		if name, value, ok := strings.Cut(line, ": "); ok {
			h[name] = []string{value}
		}
	}
	return h
}

// readBounded reads r to its end into buf, failing beyond limit bytes.
func readBounded(r io.Reader, buf []byte, limit int) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		switch {
		case len(buf) > limit:
			return nil, fmt.Errorf("%w: a body of more than the %d bytes expected at most", errAnswer, limit)
		case errors.Is(err, io.EOF):
			return buf, nil
		case err != nil:
			return nil, fmt.Errorf("read body: %w", err)
		}
	}
}

// bufs holds answer buffers for reuse.
var bufs = sync.Pool{New: func() any { return new([]byte) }}

// getBuf returns a buffer with room for an answer of length bytes (-1:
// unknown) up to limit, and one more to see its end.
func getBuf(length int64, limit int) *[]byte {
	b := bufs.Get().(*[]byte)
	want := 512
	if length >= 0 {
		want = int(length) + 1
	}
	if want = min(want, limit+1); cap(*b) < want {
		*b = make([]byte, 0, want)
	}
	return b
}

func (t *httpTransport) keepOnly([]string) { t.tr.CloseIdleConnections() }

func (t *httpTransport) close() {
	t.cancel()
	t.mu.Lock()
	t.closed = true
	all := make([]*trackedConn, 0, len(t.open))
	for c := range t.open {
		all = append(all, c)
	}
	t.mu.Unlock()
	for _, c := range all {
		_ = c.Close()
	}
	t.tr.CloseIdleConnections()
}

func (t *httpTransport) conns() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.open)
}

// The net/http transport serves the same calls as the own one: without
// it the benchmark would compare against something that does not work.
func TestHTTPTransportServes(t *testing.T) {
	f := startFake(t, 1, nil)
	c := newClient(t, Config{Servers: []string{f.addr}})
	c.pool.close()
	c.pool = newHTTPTransport(4, nil)
	var last int64
	for i := range 3 {
		id, err := c.Next(context.Background())
		if err != nil || id <= last {
			t.Fatalf("Next #%d over net/http: %d, %v (last %d)", i, id, err, last)
		}
		last = id
	}
	if ids, err := c.NextSegmentN(context.Background(), "t", 5); err != nil || len(ids) != 5 {
		t.Fatalf("NextSegmentN over net/http: %v, %v", ids, err)
	}
}
