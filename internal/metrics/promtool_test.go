package metrics

import (
	"bytes"
	"strings"
	"testing"

	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
	"codeberg.org/snowflaked/snowflaked/segment"
	"codeberg.org/snowflaked/snowflaked/server"
)

// fullExposition is a scrape with every source set, segment tags, the
// process families and some requests counted.
func fullExposition(t *testing.T) string {
	t.Helper()
	f := newFixture(t, func(c *Config) { c.ProcessMetrics = true })
	f.snap.Segments = []segment.TagStatus{{Tag: "orders", Issued: 42, Loads: 3, Available: 958, Step: 2000}}
	f.snap.PossiblyLost = 1
	f.m.Request(server.EndpointID, 200)
	f.m.Request(server.EndpointIDs, 400)
	f.m.IssuedIDs(3)
	var b bytes.Buffer
	f.m.WritePrometheus(&b)
	return b.String()
}

// Every family, the node's own and the Go runtime's, has HELP and TYPE, and
// Prometheus's own linter finds nothing.
func TestExposition_PassesPromtool(t *testing.T) {
	text := fullExposition(t)
	ex, err := parseExposition(text)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	for _, s := range ex.samples {
		fam := familyOf(s.name, ex.types)
		if ex.types[fam] == "" || strings.TrimSpace(ex.helps[fam]) == "" {
			t.Errorf("family %s (sample %s): TYPE %q, HELP %q", fam, s.name, ex.types[fam], ex.helps[fam])
		}
		// Every family the library writes here is known: none falls back
		// to the generic help (a library upgrade that adds one fails here).
		if strings.Contains(ex.helps[fam], "no description") {
			t.Errorf("family %s has no description of its own: add it to processFamilies", fam)
		}
	}
	for _, name := range []string{"snowflaked_ids_issued_total", "snowflaked_requests_total", "go_goroutines", "go_gc_duration_seconds", "process_cpu_seconds_total"} {
		if ex.types[name] == "" {
			t.Errorf("family %s missing", name)
		}
	}
	if got := mustFind(t, ex, "snowflaked_ids_issued_total"); got != 3 {
		t.Errorf("snowflaked_ids_issued_total = %v, want 3", got)
	}
	testsupport.CheckMetrics(t, text)
}

// The Go library's samples are grouped per family behind HELP and TYPE; a
// family this package has no description of is untyped, with a help text
// that says so, and a histogram's series stay with their family.
func TestAnnotate(t *testing.T) {
	known := map[string]family{
		"h_seconds": {"h_seconds", "histogram", "A histogram."},
		"g":         {"g", "gauge", "A gauge."},
	}
	in := "g 1\nh_seconds_bucket{le=\"1\"} 2\nnew_thing_count 3\nh_seconds_bucket{le=\"+Inf\"} 4\nh_seconds_sum 5\nh_seconds_count 4\n"
	e := &expo{}
	annotate(e, in, known)
	want := `# HELP g A gauge.
# TYPE g gauge
g 1
# HELP h_seconds A histogram.
# TYPE h_seconds histogram
h_seconds_bucket{le="1"} 2
h_seconds_bucket{le="+Inf"} 4
h_seconds_sum 5
h_seconds_count 4
# HELP new_thing_count Reported by the Go metrics library; snowflaked has no description of it.
# TYPE new_thing_count untyped
new_thing_count 3
`
	if got := string(e.b); got != want {
		t.Errorf("annotate:\n%s\nwant:\n%s", got, want)
	}
}
