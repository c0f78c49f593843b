package conformance

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"codeberg.org/snowflaked/snowflaked/client"
)

// recorder is a reporter that keeps what the checks report, so that the
// suite's own tests can show each check fails on what it must catch.
type recorder struct{ msgs []string }

// fatal stops a check the way t.Fatalf would.
type fatal struct{}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	panic(fatal{})
}

// run runs check and returns what it reported.
func (r *recorder) run(check func()) string {
	func() {
		defer func() {
			if v := recover(); v != nil {
				if _, ok := v.(fatal); !ok {
					panic(v)
				}
			}
		}()
		check()
	}()
	return strings.Join(r.msgs, "; ")
}

// Each check of the suite, given what a broken client would give, fails,
// and passes what a correct one gives.
func TestChecksCatchBrokenClients(t *testing.T) {
	l := client.DefaultLayout()
	w := &world{layout: l}
	id := func(worker, seq int64) int64 { return 1<<30<<22 | worker<<12 | seq }
	doc := loadSpec(t)
	routes := []string{"/ids", "/segment/{tag}"}
	req := func(path, query string) recorded {
		return recorded{method: http.MethodGet, path: path, rawQuery: query, header: http.Header{}}
	}
	for _, tc := range []struct {
		name  string
		check func(r reporter)
		want  string // "" passes
	}{
		{"unique and increasing", func(r reporter) { newChecker(r, w).caller([]int64{id(1, 1), id(2, 1), id(1, 2)}) }, ""},
		{"a duplicate", func(r reporter) { newChecker(r, w).caller([]int64{id(1, 1), id(2, 1), id(1, 1)}) }, "twice"},
		{"a duplicate across callers", func(r reporter) {
			c := newChecker(r, w)
			c.caller([]int64{id(1, 1)})
			c.caller([]int64{id(1, 1)})
		}, "twice"},
		{"backwards within a worker", func(r reporter) { newChecker(r, w).caller([]int64{id(1, 2), id(2, 1), id(1, 1)}) }, "not increasing"},
		{"a negative ID", func(r reporter) { newChecker(r, w).caller([]int64{-5}) }, "negative"},
		{"a call's IDs out of order", func(r reporter) { increasing(r, "next_ids", []int64{3, 5, 4}) }, "not increasing"},
		{"described routes and codes documented", func(r reporter) {
			checkDescribed(r, doc, routes, []string{"batch_timeout", "unknown_tag", "invalid_count"})
		}, ""},
		{"a route the document lacks", func(r reporter) { checkDescribed(r, doc, []string{"/ids", "/next"}, []string{"invalid_count"}) }, "/next"},
		{"a code no route of the client has", func(r reporter) { checkDescribed(r, doc, []string{"/ids"}, []string{"unknown_tag"}) }, "unknown_tag"},
		{"a made-up code", func(r reporter) { checkDescribed(r, doc, routes, []string{"nodes_busy"}) }, "nodes_busy"},
		{"requests as documented", func(r reporter) {
			checkRecorded(r, doc, routes, []recorded{req("/ids", "count=5"), req("/segment/orders", "count=2")})
		}, ""},
		{"a count out of bounds", func(r reporter) { checkRecorded(r, doc, routes, []recorded{req("/ids", "count=0")}) }, "count"},
		{"an unknown parameter", func(r reporter) { checkRecorded(r, doc, routes, []recorded{req("/ids", "count=5&n=5")}) }, "n"},
		{"a path the document lacks", func(r reporter) { checkRecorded(r, doc, routes, []recorded{req("/v2/ids", "count=5")}) }, "/v2/ids"},
		{"a route the client did not describe", func(r reporter) { checkRecorded(r, doc, routes, []recorded{req("/uuids", "count=5")}) }, "not one the client described"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{}
			got := r.run(func() { tc.check(r) })
			switch {
			case tc.want == "" && got != "":
				t.Errorf("the check failed what a correct client gives: %s", got)
			case tc.want != "" && !strings.Contains(got, tc.want):
				t.Errorf("the check reported %q, want a failure naming %q", got, tc.want)
			}
		})
	}
}
