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

	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
)

// moduleName is the module whose root the tests look for.
const moduleName = testsupport.ModuleName

// moduleRoot returns the directory of the module's go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	return testsupport.ModuleRoot(t)
}

// readRepoFile returns the content of a file given relative to the module root.
func readRepoFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(moduleRoot(t), filepath.FromSlash(rel)))
	if err != nil {
		t.Fatalf("read %s: %v", rel, err)
	}
	return string(b)
}

// parsePackage parses the non-test .go files (every build tag) of the
// package in dir, relative to the module root, with comments.
func parsePackage(t *testing.T, dir string) (*token.FileSet, []*ast.File) {
	t.Helper()
	abs := filepath.Join(moduleRoot(t), filepath.FromSlash(dir))
	entries, err := os.ReadDir(abs)
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(abs, name), nil, parser.ParseComments)
		if err != nil {
			t.Fatalf("parse %s/%s: %v", dir, name, err)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		t.Fatalf("no Go files in %s", dir)
	}
	return fset, files
}

// constSpecs returns the const specs of f that have one name satisfying
// keep and one value.
func constSpecs(f *ast.File, keep func(name string) bool) []*ast.ValueSpec {
	var out []*ast.ValueSpec
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			if len(vs.Names) == 1 && len(vs.Values) == 1 && keep(vs.Names[0].Name) {
				out = append(out, vs)
			}
		}
	}
	return out
}

// unquoteLit returns the value of a string literal; anything else fails the
// test.
func unquoteLit(t *testing.T, e ast.Expr) string {
	t.Helper()
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		t.Fatalf("%T is not a string literal", e)
	}
	v, err := strconv.Unquote(lit.Value)
	if err != nil {
		t.Fatalf("unquote %s: %v", lit.Value, err)
	}
	return v
}

// isStringLit reports whether e is a string literal.
func isStringLit(e ast.Expr) bool {
	lit, ok := e.(*ast.BasicLit)
	return ok && lit.Kind == token.STRING
}

// commentText returns the text of a comment group, markers included ("" for
// none).
func commentText(g *ast.CommentGroup) string {
	if g == nil {
		return ""
	}
	var parts []string
	for _, c := range g.List {
		parts = append(parts, c.Text)
	}
	return strings.Join(parts, " ")
}

// stringConsts returns the string-literal constants of the package in dir
// whose names satisfy keep, by name (every build tag's files included).
func stringConsts(t *testing.T, dir string, keep func(name string) bool) map[string]string {
	t.Helper()
	_, files := parsePackage(t, dir)
	out := map[string]string{}
	for _, f := range files {
		for _, vs := range constSpecs(f, keep) {
			if isStringLit(vs.Values[0]) {
				out[vs.Names[0].Name] = unquoteLit(t, vs.Values[0])
			}
		}
	}
	return out
}

// stringConstsOfType returns the string-literal constants of the package in
// dir declared with the named type (const X T = "…"), by name.
func stringConstsOfType(t *testing.T, dir, typeName string) map[string]string {
	t.Helper()
	_, files := parsePackage(t, dir)
	out := map[string]string{}
	for _, f := range files {
		for _, vs := range constSpecs(f, func(string) bool { return true }) {
			if id, ok := vs.Type.(*ast.Ident); ok && id.Name == typeName && isStringLit(vs.Values[0]) {
				out[vs.Names[0].Name] = unquoteLit(t, vs.Values[0])
			}
		}
	}
	return out
}
