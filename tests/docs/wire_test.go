package docs

import (
	"fmt"
	"go/ast"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// wireUsers are the packages on either side of the wire contract: the
// client and the parts of the server that answer it or write the znodes
// the client reads. Each takes the contract's values from client/wire.
var wireUsers = []string{
	"client", "server", "uuidv7", "coordinator", "internal/zkclient", "internal/ctl",
}

// wireExempt are values still written outside client/wire, by "file:
// value", with why; an exemption that no longer matches anything fails the
// test, so the list shrinks with them.
var wireExempt = map[string]string{
	"server/segments.go: out_of_service": "a state of the clock guard (its String), not the error code",
}

// jsonCodeRE finds the code of a JSON error body written as a literal.
var jsonCodeRE = regexp.MustCompile(`"code":"([a-z_]+)"`)

// queryRE finds a query parameter in a literal that builds a query.
var queryRE = regexp.MustCompile(`[?&]([a-z_]+)=`)

// wireValuesIn returns the contract's values (from values, by value) that
// s holds: s itself, the longest path or root that starts it (as in
// "/ids?count=", "/segment/"), a query parameter it sets and the code of
// an error body in it. A query parameter's name counts only in a query:
// count or gene alone is a word, not the wire.
func wireValuesIn(s string, values map[string]string) []string {
	var out []string
	if _, ok := values[s]; ok && !strings.HasPrefix(values[s], "Param") {
		out = append(out, s)
	} else if strings.HasPrefix(s, "/") {
		best := ""
		for v, name := range values {
			if (strings.HasPrefix(name, "Path") || name == "Root") && len(v) > len(best) &&
				(strings.HasPrefix(s, v+"/") || strings.HasPrefix(s, v+"?")) {
				best = v
			}
		}
		if best != "" {
			out = append(out, best)
		}
	}
	for _, m := range queryRE.FindAllStringSubmatch(s, -1) {
		if strings.HasPrefix(values[m[1]], "Param") {
			out = append(out, m[1])
		}
	}
	for _, m := range jsonCodeRE.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestWireWrittenOnce checks that the values of the wire contract (the
// error codes, the paths and query parameters of the API, the znode root)
// are written in client/wire alone: a literal with one of them in a
// package on either side of the wire (or an error body naming a code) is
// a second copy that can drift.
func TestWireWrittenOnce(t *testing.T) {
	values := map[string]string{} // value -> client/wire constant
	for _, prefix := range []string{"Code", "Path", "Param", "Root"} {
		for name, v := range stringConsts(t, dirWire, func(n string) bool { return strings.HasPrefix(n, prefix) }) {
			values[v] = name
		}
	}
	if values["/snowflaked"] != "Root" || values["batch_timeout"] != "CodeBatchTimeout" || values["/uuids"] != "PathUUIDs" {
		t.Fatalf("found %d values in %s, not the contract's: %v", len(values), dirWire, values)
	}
	var found []string
	used := map[string]bool{}
	for _, dir := range wireUsers {
		fset, files := parsePackage(t, dir)
		for _, f := range files {
			rel := filepath.ToSlash(filepath.Join(dir, filepath.Base(fset.Position(f.Pos()).Filename)))
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatalf("%s: unquote %s: %v", rel, lit.Value, err)
				}
				seen := wireValuesIn(s, values)
				for _, v := range seen {
					if _, ok := wireExempt[rel+": "+v]; ok {
						used[rel+": "+v] = true
						continue
					}
					name := values[v]
					if name == "" {
						name = "an error code"
					}
					found = append(found, fmt.Sprintf("%s:%d: %q (client/wire has it: %s)", rel, fset.Position(lit.Pos()).Line, v, name))
				}
				return true
			})
		}
	}
	for e := range wireExempt {
		if !used[e] {
			found = append(found, fmt.Sprintf("%s: exempt, but no longer written there: drop the exemption", e))
		}
	}
	sort.Strings(found)
	for _, f := range found {
		t.Error(f)
	}
}

func TestWireValuesIn(t *testing.T) {
	values := map[string]string{
		"/snowflaked": "Root", "/ids": "PathIDs", "/readyz": "PathReadyz", "/readyz/segment": "PathReadyzSegment",
		"count": "ParamCount", "batch_timeout": "CodeBatchTimeout",
	}
	tests := []struct {
		s    string
		want []string
	}{
		{"batch_timeout", []string{"batch_timeout"}},
		{"/ids", []string{"/ids"}},
		{"/ids?count=", []string{"/ids", "count"}},
		{"/idsx", nil},
		{"/readyz/segment", []string{"/readyz/segment"}},
		{"/readyz/segment/x", []string{"/readyz/segment"}},
		{"/snowflaked/", []string{"/snowflaked"}},
		{"count", nil},
		{"&count=", []string{"count"}},
		{`{"error":{"code":"internal","message":"…"}}`, []string{"internal"}},
		{"a timeout", nil},
	}
	for _, tt := range tests {
		if got := wireValuesIn(tt.s, values); !slices.Equal(got, tt.want) {
			t.Errorf("wireValuesIn(%q) = %q, want %q", tt.s, got, tt.want)
		}
	}
}
