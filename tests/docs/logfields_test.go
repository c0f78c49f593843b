package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Every duration a log line carries names its unit: zerolog's Dur writes
// float milliseconds, so each field written with it ends in _ms, and
// docs/operations.md says so.
func TestLogDurationFieldsNameTheirUnit(t *testing.T) {
	root := moduleRoot(t)
	fset := token.NewFileSet()
	var bad []string
	found := 0
	for _, files := range sourceFiles(t, root) {
		for _, path := range files {
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatalf("parse %s: %v", path, err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) != 2 {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "Dur" {
					return true
				}
				found++
				lit, ok := call.Args[0].(*ast.BasicLit)
				name, err := strconv.Unquote(litValue(lit, ok))
				if err != nil || !strings.HasSuffix(name, "_ms") {
					rel, _ := filepath.Rel(root, fset.Position(call.Pos()).Filename)
					bad = append(bad, rel+":"+strconv.Itoa(fset.Position(call.Pos()).Line)+": "+litValue(lit, ok))
				}
				return true
			})
		}
	}
	if found == 0 {
		t.Fatal("no log field written with Dur: the walk found nothing to check")
	}
	for _, b := range bad {
		t.Errorf("%s: a duration log field must be a literal name ending in _ms (zerolog writes milliseconds)", b)
	}
	ops, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ops), "`_ms`") {
		t.Error("docs/operations.md does not state the `_ms` convention of duration log fields")
	}
}

// litValue returns the source text of a literal, or "" when there is none.
func litValue(lit *ast.BasicLit, ok bool) string {
	if !ok {
		return ""
	}
	return lit.Value
}
