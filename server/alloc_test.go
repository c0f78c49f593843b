package server

import (
	"testing"

	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// newRequestCtx returns a RequestCtx for calling a handler directly.
func newRequestCtx(method, uri string) *fasthttp.RequestCtx {
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.Header.SetMethod(method)
	ctx.Request.SetRequestURI(uri)
	return ctx
}

// resetCtx does what fasthttp's server does between two requests on one
// connection, minus re-reading the request: it resets the user values
// (closing them, which returns an /ids batch to its pool) and the response
// (returning its body buffer to fasthttp's pool).
func resetCtx(ctx *fasthttp.RequestCtx) {
	ctx.ResetUserValues()
	ctx.Response.Reset()
}

// TestHandlerAllocs: with a reused RequestCtx (as fasthttp's server reuses
// it) the hot endpoints allocate nothing per request.
func TestHandlerAllocs(t *testing.T) {
	if testsupport.RaceEnabled {
		t.Skip("the race detector makes sync.Pool drop items at random: allocation counts are meaningless")
	}
	tests := []struct {
		name     string
		uri      string
		observer bool
	}{
		{"id", "/id", false},
		{"id with observer", "/id", true},
		{"id json", "/id?format=json", false},
		{"leaf", "/api/snowflake/get/leaf-key", false},
		{"ids 100", "/ids?count=100", false},
		{"ids 100 json", "/ids?count=100&format=json", true},
		{"id base62", "/id?format=base62", false},
		{"ids 100 base32", "/ids?count=100&format=base32", false},
		{"leaf base58", "/api/snowflake/get/leaf-key?format=base58", false},
		{"decode", "/decode/123456789", false},
		{"healthz", "/healthz", false},
		{"readyz", "/readyz", false},
		{"time", "/time", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := &countingObserver{}
			f := newFixture(t, snowflake.DefaultLayout(), func(c *Config) {
				if tt.observer {
					c.Observer = obs
				}
			})
			h := f.srv.Handler()
			ctx := newRequestCtx("GET", tt.uri)
			for range 10 { // warm up pools and header buffers
				resetCtx(ctx)
				h(ctx)
			}
			if ctx.Response.StatusCode() != 200 {
				t.Fatalf("status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
			}
			allocs := testing.AllocsPerRun(1000, func() {
				resetCtx(ctx)
				h(ctx)
			})
			if ctx.Response.StatusCode() != 200 {
				t.Fatalf("status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
			}
			if allocs != 0 {
				t.Fatalf("GET %s: %v allocations per request, want 0", tt.uri, allocs)
			}
			if tt.observer && obs.requests.Load() < 1000 {
				t.Fatalf("observer saw %d requests", obs.requests.Load())
			}
		})
	}
}
