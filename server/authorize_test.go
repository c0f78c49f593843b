package server

import (
	"errors"
	"testing"

	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// Config.Authorize is asked before every route, built-in or extra; its
// error answers 403 client_not_allowed and nothing is served.
func TestAuthorizeRefusesBeforeAnyRoute(t *testing.T) {
	extra := false
	f := newFixture(t, snowflake.DefaultLayout(), func(c *Config) {
		c.Routes = map[string]fasthttp.RequestHandler{"/metrics": func(ctx *fasthttp.RequestCtx) { extra = true }}
		c.Authorize = func(ctx *fasthttp.RequestCtx) error {
			if string(ctx.Path()) == "/healthz" {
				return nil
			}
			return errors.New("client certificate \"x\" is not allowed")
		}
	}).serve(t)
	tests := []struct {
		path string
		want int
	}{
		{"/healthz", fasthttp.StatusOK},
		{"/id", fasthttp.StatusForbidden},
		{"/ids?count=3", fasthttp.StatusForbidden},
		{"/metrics", fasthttp.StatusForbidden},
		{"/no-such-path", fasthttp.StatusForbidden},
	}
	for _, tc := range tests {
		r := f.do(t, "GET", tc.path)
		if r.status != tc.want {
			t.Errorf("GET %s: %d %s, want %d", tc.path, r.status, r.body, tc.want)
			continue
		}
		if tc.want == fasthttp.StatusForbidden {
			if e := decodeError(t, r); e.Code != codeClientNotAllowed {
				t.Errorf("GET %s: code %q, want %q", tc.path, e.Code, codeClientNotAllowed)
			}
		}
	}
	if extra {
		t.Error("the extra route ran for a refused client")
	}
}
