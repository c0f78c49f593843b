package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
)

// withBuilt makes Run call f with the node once it is built, before it
// serves (tests reach the node's parts through it).
func withBuilt(f func(*node)) seam { return func(s *seams) { s.built = f } }

// withoutMetrics builds the server without the metrics observer, as the
// node was before metrics were wired (for benchmarks only).
func withoutMetrics() seam { return func(s *seams) { s.noMetrics = true } }

// runInService runs a standalone node on a loopback listener and returns
// it once it is in service.
func runInService(t testing.TB, cfg Config, opts ...seam) *node {
	t.Helper()
	got := make(chan *node, 1)
	startRun(t, cfg, append(opts, withBuilt(func(n *node) { got <- n }))...)
	var n *node
	select {
	case n = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("node not built within 30s")
	}
	deadline := time.Now().Add(10 * time.Second)
	for !n.guard.Ready() {
		if time.Now().After(deadline) {
			t.Fatalf("node not in service within 10s: %+v", n.guard.Status())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return n
}

// requestLoop returns a func that calls the node's HTTP handler for GET uri
// with one reused RequestCtx, reset between requests as fasthttp's server
// does, and the ctx to inspect.
func requestLoop(n *node, uri string) (func(), *fasthttp.RequestCtx) {
	h := n.srv.Handler()
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.Header.SetMethod(fasthttp.MethodGet)
	ctx.Request.SetRequestURI(uri)
	return func() {
		ctx.ResetUserValues()
		ctx.Response.Reset()
		h(ctx)
	}, ctx
}

// benchConfig: a layout with 2^19 IDs per ms, so the 4096-per-ms ceiling
// of the default layout does not hide the handler's own cost.
func benchConfig(t testing.TB) Config {
	cfg := testConfig(t, 3)
	cfg.Layout = "41/3/19"
	return cfg
}

// TestNodeIDAllocs: GET /id through the node's own server, with the metrics
// wired as its observer, allocates nothing per request; and the metrics
// did count the requests.
func TestNodeIDAllocs(t *testing.T) {
	if testsupport.RaceEnabled {
		t.Skip("the race detector makes sync.Pool drop items at random: allocation counts are meaningless")
	}
	tests := []struct {
		uri      string
		endpoint string
	}{
		{"/id", "id"},
		{"/id?format=json", "id"},
		{"/api/snowflake/get/key", "leaf"},
	}
	for _, tc := range tests {
		t.Run(tc.uri, func(t *testing.T) {
			n := runInService(t, benchConfig(t))
			call, ctx := requestLoop(n, tc.uri)
			for range 10 { // warm up pools and header buffers
				call()
			}
			if ctx.Response.StatusCode() != fasthttp.StatusOK {
				t.Fatalf("GET %s: %d %s", tc.uri, ctx.Response.StatusCode(), ctx.Response.Body())
			}
			const runs = 1000
			if a := testing.AllocsPerRun(runs, call); a != 0 {
				t.Errorf("GET %s with metrics: %v allocations per request, want 0", tc.uri, a)
			}
			if ctx.Response.StatusCode() != fasthttp.StatusOK {
				t.Fatalf("GET %s: %d %s", tc.uri, ctx.Response.StatusCode(), ctx.Response.Body())
			}
			scrape := scrapeMetrics(t, n)
			want := series("snowflaked_requests_total", "endpoint", tc.endpoint, "code", "2xx")
			if got := scrape[want]; got < runs+10 {
				t.Errorf("%s = %v, want at least %d: the observer is not wired", want, got, runs+10)
			}
			if got := scrape["snowflaked_ids_issued_total"]; got < runs+10 {
				t.Errorf("snowflaked_ids_issued_total = %v, want at least %d", got, runs+10)
			}
		})
	}
}

// BenchmarkNodeHandlerID: GET /id through the node's server, without the
// metrics observer (as before they were wired) and with it. Run:
//
//	go test -run '^$' -bench NodeHandlerID -count 5 ./node/
func BenchmarkNodeHandlerID(b *testing.B) {
	for _, withMetrics := range []bool{false, true} {
		b.Run(fmt.Sprintf("metrics=%v", withMetrics), func(b *testing.B) {
			var opts []seam
			if !withMetrics {
				opts = append(opts, withoutMetrics())
			}
			n := runInService(b, benchConfig(b), opts...)
			call, ctx := requestLoop(n, "/id")
			call()
			if ctx.Response.StatusCode() != fasthttp.StatusOK {
				b.Fatalf("GET /id: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				call()
			}
			b.StopTimer()
			if ctx.Response.StatusCode() != fasthttp.StatusOK {
				b.Fatalf("GET /id: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
			}
		})
	}
}
