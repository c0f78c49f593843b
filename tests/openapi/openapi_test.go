package openapi

import (
	"context"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
	"codeberg.org/snowflaked/snowflaked/server"
	"github.com/getkin/kin-openapi/openapi3"
)

// moduleName is the module whose root the tests look for.
const moduleName = testsupport.ModuleName

// docPath is the document, from the module root.
const docPath = "docs/openapi.yaml"

// moduleRoot returns the directory of the module's go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	return testsupport.ModuleRoot(t)
}

// loadDoc loads and validates the document.
func loadDoc(t *testing.T) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(filepath.Join(moduleRoot(t), docPath))
	if err != nil {
		t.Fatalf("load %s: %v", docPath, err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("%s is not a valid OpenAPI document: %v", docPath, err)
	}
	return doc
}

// TestOpenAPIDocumentIsValid checks that the document loads, is a valid
// OpenAPI 3.0 document, and that every operation answers GET and HEAD
// alike, with the error answers it documents in the error schemas.
func TestOpenAPIDocumentIsValid(t *testing.T) {
	doc := loadDoc(t)
	if !strings.HasPrefix(doc.OpenAPI, "3.0.") {
		t.Errorf("openapi %q: want 3.0.x, what kin-openapi validates fully", doc.OpenAPI)
	}
	if doc.Paths.Len() < 15 {
		t.Fatalf("%s has only %d paths", docPath, doc.Paths.Len())
	}
	for path, item := range doc.Paths.Map() {
		ops := item.Operations()
		if len(ops) != 2 || ops["GET"] == nil || ops["HEAD"] == nil {
			t.Errorf("%s: operations %v, want GET and HEAD (every endpoint answers both)", path, slices.Sorted(mapKeys(ops)))
			continue
		}
		get, head := ops["GET"], ops["HEAD"]
		if get.Responses != head.Responses && !slices.Equal(slices.Sorted(mapKeys(get.Responses.Map())), slices.Sorted(mapKeys(head.Responses.Map()))) {
			t.Errorf("%s: GET answers %v, HEAD %v", path, slices.Sorted(mapKeys(get.Responses.Map())), slices.Sorted(mapKeys(head.Responses.Map())))
		}
		for status, ref := range get.Responses.Map() {
			if ref.Value == nil || ref.Value.Description == nil || *ref.Value.Description == "" {
				t.Errorf("%s %s: no description", path, status)
			}
			if !strings.HasPrefix(status, "2") && ref.Value != nil && ref.Value.Content.Get("application/json") == nil {
				t.Errorf("%s %s: an error answer without an application/json body", path, status)
			}
		}
	}
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// route is one row of the server's route table: its path, and whether it
// answers path + "/" + a rest (sub).
type route struct {
	path string
	sub  bool
}

// serverRoutes returns the server's route table (server.BuiltinRoutes) and the
// node's own routes in a production build (its *Path constants outside
// files with build tags: /metrics and /status).
func serverRoutes(t *testing.T) []route {
	t.Helper()
	var out []route
	for _, r := range server.BuiltinRoutes() {
		out = append(out, route{path: r.Path, sub: r.Sub})
	}
	if len(out) < 10 {
		t.Fatalf("server: %d routes in its route table, want the whole table", len(out))
	}
	own := stringConsts(t, "node", func(n string) bool { return strings.HasSuffix(n, "Path") })
	if len(own) == 0 {
		t.Fatal("node: no *Path constants (its own routes)")
	}
	for _, p := range own {
		out = append(out, route{path: p})
	}
	return out
}

// parseDir parses the files of the package in dir (from the module root)
// that a production build compiles: no tests, no files of other build tags.
func parseDir(t *testing.T, dir string) []*ast.File {
	t.Helper()
	abs := filepath.Join(moduleRoot(t), dir)
	pkg, err := build.Default.ImportDir(abs, 0)
	if err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(abs, name), nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// stringConsts returns the string constants of the package in dir whose
// names keep says, by name.
func stringConsts(t *testing.T, dir string, keep func(string) bool) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range parseDir(t, dir) {
		for _, vs := range constSpecs(f, keep) {
			if lit, ok := vs.Values[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				out[vs.Names[0].Name] = s
			}
		}
	}
	return out
}

// constSpecs returns the single-name, single-value constant specs of f
// whose names keep says.
func constSpecs(f *ast.File, keep func(string) bool) []*ast.ValueSpec {
	var out []*ast.ValueSpec
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			if len(vs.Names) == 1 && len(vs.Values) == 1 && keep(vs.Names[0].Name) {
				out = append(out, vs)
			}
		}
	}
	return out
}

// paramRE is a path template's parameter.
var paramRE = regexp.MustCompile(`\{[^/{}]+\}`)

// routeOfPath returns the route a document path stands for: a path
// without parameters is a route of its own, one that ends in "/{param}" is
// the sub route of what comes before.
func routeOfPath(path string) (route, bool) {
	if !strings.Contains(path, "{") {
		return route{path: path}, true
	}
	i := strings.LastIndex(path, "/")
	if !paramRE.MatchString(path[i+1:]) || paramRE.FindString(path[i+1:]) != path[i+1:] || strings.Contains(path[:i], "{") {
		return route{}, false
	}
	return route{path: path[:i], sub: true}, true
}

// TestOpenAPIPathsAreTheRouteTable checks that every route of the server's
// route table and every route of the node's own appears in the document,
// and that the document has no path beyond them.
func TestOpenAPIPathsAreTheRouteTable(t *testing.T) {
	doc := loadDoc(t)
	want := map[route]bool{}
	for _, r := range serverRoutes(t) {
		want[r] = true
	}
	got := map[route]string{}
	for path := range doc.Paths.Map() {
		r, ok := routeOfPath(path)
		if !ok {
			t.Errorf("%s: a path with a parameter must end in its only one, /{name}", path)
			continue
		}
		got[r] = path
		if !want[r] {
			t.Errorf("%s documents %s, which the server's route table does not have (sub %v)", docPath, path, r.sub)
		}
	}
	for r := range want {
		if _, ok := got[r]; !ok {
			form := r.path
			if r.sub {
				form += "/{…}"
			}
			t.Errorf("the server answers %s, which %s does not document", form, docPath)
		}
	}
}

func TestRouteOfPath(t *testing.T) {
	tests := []struct {
		path string
		want route
		ok   bool
	}{
		{"/id", route{path: "/id"}, true},
		{"/decode/{id}", route{path: "/decode", sub: true}, true},
		{"/api/segment/get/{tag}", route{path: "/api/segment/get", sub: true}, true},
		{"/a/{x}/b", route{}, false},
		{"/a/x{y}", route{}, false},
	}
	for _, tt := range tests {
		got, ok := routeOfPath(tt.path)
		if got != tt.want || ok != tt.ok {
			t.Errorf("routeOfPath(%q) = %v, %v; want %v, %v", tt.path, got, ok, tt.want, tt.ok)
		}
	}
}

// TestOpenAPIErrorCodesAreTheWire checks that the document's ErrorCode
// enum lists every error code of client/wire (its Code* constants) and no
// other.
func TestOpenAPIErrorCodesAreTheWire(t *testing.T) {
	doc := loadDoc(t)
	ref := doc.Components.Schemas["ErrorCode"]
	if ref == nil || ref.Value == nil {
		t.Fatalf("%s has no schema ErrorCode", docPath)
	}
	documented := map[string]bool{}
	for _, v := range ref.Value.Enum {
		s, ok := v.(string)
		if !ok {
			t.Errorf("ErrorCode enum holds %v, not a string", v)
		}
		if documented[s] {
			t.Errorf("ErrorCode enum lists %s twice", s)
		}
		documented[s] = true
	}
	wire := map[string]string{}
	for name, code := range stringConsts(t, "client/wire", func(n string) bool { return strings.HasPrefix(n, "Code") }) {
		wire[code] = name
	}
	if len(wire) < 20 {
		t.Fatalf("found only %d error codes in client/wire", len(wire))
	}
	for code, name := range wire {
		if !documented[code] {
			t.Errorf("client/wire's %s (%q) is not in the ErrorCode enum of %s", name, code, docPath)
		}
	}
	for code := range documented {
		if _, ok := wire[code]; !ok {
			t.Errorf("the ErrorCode enum of %s lists %q, which client/wire does not have", docPath, code)
		}
	}
}

// apiTablePaths returns the paths of the requests that docs/api.md's
// endpoint table (the section "## API") shows, each {parameter} written
// {}, leaving out the rows of the chaos build's endpoints.
func apiTablePaths(t *testing.T, doc string) map[string]bool {
	t.Helper()
	start := strings.Index(doc, "\n## API\n")
	if start < 0 {
		t.Fatal("docs/api.md has no section \"## API\"")
	}
	sec := doc[start+len("\n## API\n"):]
	if end := strings.Index(sec, "\n## "); end >= 0 {
		sec = sec[:end]
	}
	out := map[string]bool{}
	for _, l := range strings.Split(sec, "\n") {
		cells := strings.Split(strings.Trim(strings.TrimSpace(l), "|"), "|")
		if !strings.HasPrefix(strings.TrimSpace(l), "|") || len(cells) < 2 || strings.Contains(cells[1], "chaos build only") {
			continue
		}
		for _, m := range requestRE.FindAllStringSubmatch(cells[0], -1) {
			out[normalisePath(m[1])] = true
		}
	}
	return out
}

// requestRE is a request in a code span: "`GET /path?query`".
var requestRE = regexp.MustCompile("`(?:GET|HEAD|POST|PUT|DELETE) (/[^`?\\s]*)[^`]*`")

// normalisePath writes every {parameter} of a path as {}.
func normalisePath(p string) string { return paramRE.ReplaceAllString(p, "{}") }

// TestOpenAPIDocsTableNamesTheSamePaths checks that docs/api.md's endpoint
// table and the document name the same paths (the chaos build's endpoints
// aside), and that api.md points at the document.
func TestOpenAPIDocsTableNamesTheSamePaths(t *testing.T) {
	doc := loadDoc(t)
	b, err := os.ReadFile(filepath.Join(moduleRoot(t), "docs/api.md"))
	if err != nil {
		t.Fatal(err)
	}
	api := string(b)
	if !strings.Contains(api, "](openapi.yaml)") {
		t.Error("docs/api.md does not link the document: want a link (openapi.yaml)")
	}
	table := apiTablePaths(t, api)
	if len(table) < 10 {
		t.Fatalf("docs/api.md's endpoint table shows only %d paths: %v", len(table), table)
	}
	documented := map[string]bool{}
	for p := range doc.Paths.Map() {
		documented[normalisePath(p)] = true
	}
	var diff []string
	for p := range table {
		if !documented[p] {
			diff = append(diff, "docs/api.md shows "+p+", "+docPath+" does not")
		}
	}
	for p := range documented {
		if !table[p] {
			diff = append(diff, docPath+" documents "+p+", docs/api.md's endpoint table does not")
		}
	}
	sort.Strings(diff)
	for _, d := range diff {
		t.Error(d)
	}
}

func TestAPITablePaths(t *testing.T) {
	doc := "# X\n\n## API\n\n| request | answer |\n|---|---|\n" +
		"| `GET /ids?count=N` | ids |\n" +
		"| `GET /decode/{uuid}` | a |\n| `GET /decode/{id}` | b |\n" +
		"| `GET /decode`, `GET /segment` | 400 |\n" +
		"| `POST /debug/chaos/clock?offset=-5s` | **chaos build only** (404 otherwise) |\n" +
		"\n## Other\n\n| `GET /elsewhere` | x |\n"
	got := slices.Sorted(mapKeys(apiTablePaths(t, doc)))
	want := []string{"/decode", "/decode/{}", "/ids", "/segment"}
	if !slices.Equal(got, want) {
		t.Errorf("apiTablePaths = %v, want %v", got, want)
	}
}
