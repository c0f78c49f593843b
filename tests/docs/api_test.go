package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/server"
)

// servedPaths returns every path a node serves: the API's paths (the Path*
// constants of client/wire, the contract), the server package's built-in
// paths (the paths of its route table, and its path* constants that are
// literals), the node's own routes (its *Path constants: /metrics, /status
// and the chaos build's endpoint) and, while the node does not declare them
// yet, /metrics and /status themselves.
func servedPaths(t *testing.T) []string {
	t.Helper()
	set := map[string]bool{"/metrics": true, "/status": true}
	for _, p := range stringConsts(t, dirWire, func(n string) bool { return strings.HasPrefix(n, "Path") }) {
		set[p] = true
	}
	for _, p := range stringConsts(t, "server", func(n string) bool { return strings.HasPrefix(n, "path") }) {
		set[p] = true
	}
	for _, p := range routePaths(t) {
		set[p] = true
	}
	for _, p := range stringConsts(t, "node", func(n string) bool { return strings.HasSuffix(n, "Path") }) {
		set[p] = true
	}
	if !set["/id"] || !set["/debug/chaos/clock"] {
		t.Fatalf("path scan found %v: want at least /id (server) and /debug/chaos/clock (node, chaos build)", set)
	}
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// routePaths returns the paths of the server's route table
// (server.BuiltinRoutes).
func routePaths(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, r := range server.BuiltinRoutes() {
		out = append(out, r.Path)
	}
	if len(out) == 0 {
		t.Fatalf("server: an empty route table")
	}
	return out
}

// documentsPath reports whether text shows a request on path: "`METHOD
// /path" followed by the end of the path (not "/id" inside "/ids").
func documentsPath(text, path string) bool {
	re := regexp.MustCompile("`(GET|HEAD|POST|PUT|DELETE) " + regexp.QuoteMeta(path) + `([^A-Za-z0-9_.\-]|$)`)
	return re.MatchString(text)
}

// TestDocsEndpoints checks that the API section shows a request on every
// path the node serves.
func TestDocsEndpoints(t *testing.T) {
	api := section(t, doc(t, docAPI), secAPI)
	for _, p := range servedPaths(t) {
		if !documentsPath(api, p) {
			t.Errorf("section %q shows no request on %s (want e.g. `GET %s…`)", secAPI, p, p)
		}
	}
}

func TestDocumentsPath(t *testing.T) {
	tests := []struct {
		text, path string
		want       bool
	}{
		{"| `GET /ids?count=N` |", "/ids", true},
		{"| `GET /ids?count=N` |", "/id", false},
		{"| `GET /decode/{id}` |", "/decode", true},
		{"| `POST /debug/chaos/clock?offset=-5s` |", "/debug/chaos/clock", true},
		{"`GET /id`", "/id", true},
		{"GET /id without a code span", "/id", false},
	}
	for _, tt := range tests {
		if got := documentsPath(tt.text, tt.path); got != tt.want {
			t.Errorf("documentsPath(%q, %q) = %v, want %v", tt.text, tt.path, got, tt.want)
		}
	}
}

// dirWire is the package of the wire contract, client and server's.
const dirWire = "client/wire"

// statusRE is the status at the start of an error code's doc comment in
// client/wire ("// CodeInvalidCount, status 400: …").
var statusRE = regexp.MustCompile(`^Code[A-Za-z]+, status ([1-5][0-9][0-9]):`)

// TestDocsErrorCodes checks that every error code of the API (the Code*
// constants of client/wire, public API) has a row in the API section's
// error table with its HTTP status, and that 503s document Retry-After.
func TestDocsErrorCodes(t *testing.T) {
	api := section(t, doc(t, docAPI), secAPI)
	codes := errorCodes(t)
	if len(codes) < 10 {
		t.Fatalf("found only %d error codes in %s", len(codes), dirWire)
	}
	rows := map[string][]string{}
	for _, cells := range tableRows(api) {
		if len(cells) == 3 && len(codeSpans(cells[1])) == 1 {
			rows[codeSpans(cells[1])[0]] = cells
		}
	}
	names := make([]string, 0, len(codes))
	for c := range codes {
		names = append(names, c)
	}
	sort.Strings(names)
	for _, code := range names {
		cells, ok := rows[code]
		switch {
		case !ok:
			t.Errorf("error table (status | code | when) has no row for %s (%s)", code, codes[code])
		case cells[0] != codes[code]:
			t.Errorf("error table gives %s status %s, server/errors.go says %s", code, cells[0], codes[code])
		case cells[2] == "":
			t.Errorf("error table says nothing about %s", code)
		}
	}
	if !strings.Contains(api, "Retry-After") {
		t.Error("API section does not mention Retry-After")
	}
}

// errorCodes returns the API's error codes (the Code* constants of
// client/wire) with the HTTP status their doc comment names.
func errorCodes(t *testing.T) map[string]string {
	t.Helper()
	_, files := parsePackage(t, dirWire)
	out := map[string]string{}
	for _, f := range files {
		for _, vs := range constSpecs(f, func(n string) bool { return strings.HasPrefix(n, "Code") }) {
			v := unquoteLit(t, vs.Values[0])
			m := statusRE.FindStringSubmatch(strings.TrimSpace(strings.TrimPrefix(commentText(vs.Doc), "//")))
			if m == nil {
				t.Errorf("%s: error code %s has no doc comment \"// %s, status NNN: …\" naming its status", dirWire, v, vs.Names[0].Name)
				continue
			}
			out[v] = m[1]
		}
	}
	return out
}

// TestDocsRunbookReasons checks that the runbook has a heading for every
// reason health declares, and that the four states are named.
func TestDocsRunbookReasons(t *testing.T) {
	ops := doc(t, docOperations)
	runbook := section(t, ops, secRunbook)
	reasons := stringConstsOfType(t, "internal/health", "Reason")
	if len(reasons) < 10 {
		t.Fatalf("found only %d health.Reason constants", len(reasons))
	}
	headings := map[string]bool{}
	for _, l := range strings.Split(runbook, "\n") {
		if strings.HasPrefix(l, "#") {
			for _, c := range codeSpans(l) {
				headings[c] = true
			}
		}
	}
	for name, r := range reasons {
		if r == "" {
			continue // ReasonNone: in service
		}
		if !headings[r] {
			t.Errorf("runbook has no heading for reason %s (health.%s): want a line like \"#### `%s`\"", r, name, r)
		}
	}
	for _, s := range health.States {
		if !mentionsCode(runbook, s.String()) {
			t.Errorf("runbook does not name the state `%s`", s)
		}
	}
}

// TestDocsWayBackTable checks the runbook's table of the way back from
// each reason: a row for every reason health declares, and every test it
// names exists, so the table cannot promise a return nothing shows.
func TestDocsWayBackTable(t *testing.T) {
	runbook := section(t, doc(t, docOperations), secRunbook)
	const heading = "#### The way back from each reason"
	i := strings.Index(runbook, heading)
	if i < 0 {
		t.Fatalf("runbook lacks %q", heading)
	}
	text := runbook[i+len(heading):]
	if j := strings.Index(text, "\n#### "); j >= 0 {
		text = text[:j]
	}
	tests := testFuncNames(t)
	rows := map[string]bool{}
	for _, cells := range tableRows(text) {
		if len(cells) != 4 || cells[0] == "reason" {
			continue
		}
		spans := codeSpans(cells[0])
		if len(spans) != 1 {
			t.Errorf("row %q: the first cell must be one reason in a code span", cells[0])
			continue
		}
		rows[spans[0]] = true
		named := codeSpans(cells[3])
		if len(named) == 0 {
			t.Errorf("row %s names no test", spans[0])
		}
		for _, name := range named {
			if !tests[name] {
				t.Errorf("row %s names %s, which is no test function in the repository", spans[0], name)
			}
		}
	}
	for name, r := range stringConstsOfType(t, "internal/health", "Reason") {
		if r != "" && !rows[r] {
			t.Errorf("the way-back table has no row for reason %s (health.%s)", r, name)
		}
	}
}

// testFuncNames returns the names of the Test functions in every _test.go
// file of the module.
func testFuncNames(t *testing.T) map[string]bool {
	t.Helper()
	root := moduleRoot(t)
	names := map[string]bool{}
	re := regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\)`)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == ".run" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			names[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	if len(names) < 100 {
		t.Fatalf("found only %d test functions under %s", len(names), root)
	}
	return names
}

// TestOrderingArgumentsNameRealTests checks that every test the ordering
// arguments (docs/fencing.md, docs/segments.md) cite as attacking a step
// exists: an argument whose tests were renamed away proves nothing.
func TestOrderingArgumentsNameRealTests(t *testing.T) {
	tests := testFuncNames(t)
	cited := regexp.MustCompile("`(Test[A-Za-z0-9_]+)`")
	for _, doc := range []string{"docs/fencing.md", "docs/segments.md"} {
		names := cited.FindAllStringSubmatch(readRepoFile(t, doc), -1)
		if len(names) == 0 {
			t.Errorf("%s cites no test", doc)
		}
		for _, m := range names {
			if !tests[m[1]] {
				t.Errorf("%s cites %s, which is no test function in the repository", doc, m[1])
			}
		}
	}
}
