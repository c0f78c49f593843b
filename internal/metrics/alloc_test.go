package metrics

import (
	"codeberg.org/snowflaked/snowflaked/internal/endpoint"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
	"codeberg.org/snowflaked/snowflaked/server"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// TestObserverAllocs: the calls made on the request path allocate nothing.
func TestObserverAllocs(t *testing.T) {
	f := newFixture(t, nil)
	tests := []struct {
		name string
		call func()
	}{
		{"request id 200", func() { f.m.Request(endpoint.ID, 200) }},
		{"request leaf 503", func() { f.m.Request(endpoint.Leaf, 503) }},
		{"request other 404", func() { f.m.Request(endpoint.Other, 404) }},
		{"request unknown endpoint", func() { f.m.Request(endpoint.Count, 700) }},
		{"issued ids", func() { f.m.IssuedIDs(100) }},
		{"rollback, same event", func() { f.m.ObserveRollback(2*time.Second, f.now()) }},
		{"rollback, new events", func() { f.clk.Advance(time.Minute); f.m.ObserveRollback(time.Second, f.now()) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if a := testing.AllocsPerRun(1000, tc.call); a != 0 {
				t.Errorf("%v allocations per call, want 0", a)
			}
		})
	}
}

// TestServerWithObserverAllocs: a server's GET /id with these metrics as
// its observer still allocates nothing per request.
func TestServerWithObserverAllocs(t *testing.T) {
	if testsupport.RaceEnabled {
		t.Skip("the race detector makes sync.Pool drop items at random: the server's allocation count is meaningless")
	}
	clk := clock.NewSystem()
	gen, err := snowflake.NewGenerator(snowflake.Config{Layout: snowflake.DefaultLayout(), WorkerID: 1, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	guard := health.New(nopLog, nil)
	guard.Check(health.ReasonNTPOffset).Pass()
	m, err := New(Config{Snapshot: liveSnapshot(gen, guard, clk)})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{IDs: gen, Guard: guard, Clock: clk, Log: nopLog, Observer: m})
	if err != nil {
		t.Fatal(err)
	}
	h := srv.Handler()
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.Header.SetMethod(fasthttp.MethodGet)
	ctx.Request.SetRequestURI("/id")
	if a := testing.AllocsPerRun(1000, func() {
		h(ctx)
		ctx.ResetUserValues()
		ctx.Response.Reset()
	}); a != 0 {
		t.Errorf("GET /id with metrics: %v allocations per request, want 0", a)
	}
	if got := m.ids.Load(); got < 1000 {
		t.Errorf("ids counted %d, want at least 1000: the observer was not called", got)
	}
}
