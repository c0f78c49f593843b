package server

import (
	"codeberg.org/snowflaked/snowflaked/internal/endpoint"
	"testing"
)

// TestRoutes: the route table is unambiguous (every path of a route finds
// that route, whatever the order), covers every endpoint, and says what
// Config.Routes may not shadow.
func TestRoutes(t *testing.T) {
	seen := map[string]bool{}
	covered := map[endpoint.Endpoint]bool{}
	for i := range routes {
		r := &routes[i]
		key := r.path
		if r.sub {
			key += "/…"
		}
		if seen[key] {
			t.Errorf("route %s is in the table twice", key)
		}
		seen[key] = true
		covered[r.ep] = true
		if r.ep >= endpoint.Other {
			t.Errorf("route %s reports %v: a built-in endpoint must have its own", key, r.ep)
		}
		tests := []struct{ path, rest string }{{r.path, ""}}
		if r.sub {
			tests = []struct{ path, rest string }{{r.path + "/", ""}, {r.path + "/x", "x"}, {r.path + "/x/y", "x/y"}}
		}
		for _, tc := range tests {
			got, rest := match([]byte(tc.path))
			if got != r || string(rest) != tc.rest || (!r.sub && rest != nil) {
				t.Errorf("match(%q) = %+v, %q; want route %s, %q", tc.path, got, rest, key, tc.rest)
			}
			if !isBuiltin(tc.path) {
				t.Errorf("isBuiltin(%q) = false", tc.path)
			}
		}
	}
	for e := range endpoint.Other {
		if !covered[e] {
			t.Errorf("endpoint %v has no route", e)
		}
	}
	for _, path := range []string{"/", "/metrics", "/status", "/idx", "/id/", "/ids/1", "/decod", "/readyz/", "/readyz/segments", "/uuid/1", "/api/snowflake", "/api/snowflake/getx"} {
		if r, _ := match([]byte(path)); r != nil || isBuiltin(path) {
			t.Errorf("match(%q) = %+v, want none", path, r)
		}
	}
}

// TestMatchAllocs: finding the route allocates nothing, for the first
// route, the last and none.
func TestMatchAllocs(t *testing.T) {
	for _, path := range []string{"/id", "/clock", "/api/snowflake/get/k", "/decode/1", "/nope/nope"} {
		p := []byte(path)
		if a := testing.AllocsPerRun(100, func() { match(p) }); a != 0 {
			t.Errorf("match(%q): %v allocations", path, a)
		}
	}
}
