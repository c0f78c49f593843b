package docs

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// skipDir reports whether the walk over the module skips a directory: hidden
// ones (.git, .run), build output and test data.
func skipDir(name string) bool {
	switch name {
	case "bin", "testdata", "vendor", "node_modules":
		return true
	}
	return strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")
}

// sourceFiles returns the module's non-test .go files (every build tag
// included), by directory relative to the module root.
func sourceFiles(t *testing.T, root string) map[string][]string {
	t.Helper()
	byDir := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(d.Name(), ".go") && !strings.HasSuffix(d.Name(), "_test.go") {
			rel, err := filepath.Rel(root, filepath.Dir(path))
			if err != nil {
				return err
			}
			byDir[filepath.ToSlash(rel)] = append(byDir[filepath.ToSlash(rel)], path)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	return byDir
}

// undocumented lists "file:line: what" for every exported identifier of f
// without a doc comment: functions, methods of exported types, types,
// constants and variables (a comment on a parenthesised group counts for
// its members, as golint has it).
func undocumented(fset *token.FileSet, f *ast.File, rel string) []string {
	var out []string
	miss := func(pos token.Pos, what string) {
		out = append(out, fmt.Sprintf("%s:%d: %s has no doc comment", rel, fset.Position(pos).Line, what))
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() || d.Doc != nil {
				continue
			}
			if d.Recv == nil {
				miss(d.Pos(), "func "+d.Name.Name)
				continue
			}
			if recv := receiverType(d.Recv); ast.IsExported(recv) {
				miss(d.Pos(), "method "+recv+"."+d.Name.Name)
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() && s.Doc == nil && d.Doc == nil {
						miss(s.Pos(), "type "+s.Name.Name)
					}
				case *ast.ValueSpec:
					if s.Doc != nil || d.Doc != nil {
						continue
					}
					for _, n := range s.Names {
						if n.IsExported() {
							miss(n.Pos(), d.Tok.String()+" "+n.Name)
						}
					}
				}
			}
		}
	}
	return out
}

// receiverType returns the name of a method's receiver type, without
// pointer or type parameters.
func receiverType(recv *ast.FieldList) string {
	if recv == nil || len(recv.List) == 0 {
		return ""
	}
	expr := recv.List[0].Type
	for {
		switch e := expr.(type) {
		case *ast.StarExpr:
			expr = e.X
		case *ast.IndexExpr:
			expr = e.X
		case *ast.IndexListExpr:
			expr = e.X
		case *ast.Ident:
			return e.Name
		default:
			return ""
		}
	}
}

// TestExportedIdentifiersHaveDocComments checks every non-test package of
// the module: a package comment, and a doc comment on each exported
// identifier (the project's rule: a doc comment on every exported name).
func TestExportedIdentifiersHaveDocComments(t *testing.T) {
	root := moduleRoot(t)
	byDir := sourceFiles(t, root)
	if len(byDir) < 10 {
		t.Fatalf("found Go source in only %d directories under %s: the walk is broken", len(byDir), root)
	}
	var misses []string
	for dir, files := range byDir {
		fset := token.NewFileSet()
		hasPackageDoc := map[string]bool{} // by package name
		for _, path := range files {
			f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
			if err != nil {
				t.Errorf("parse %s: %v", path, err)
				continue
			}
			rel, _ := filepath.Rel(root, path)
			rel = filepath.ToSlash(rel)
			if _, seen := hasPackageDoc[f.Name.Name]; !seen {
				hasPackageDoc[f.Name.Name] = false
			}
			if f.Doc != nil {
				hasPackageDoc[f.Name.Name] = true
			}
			misses = append(misses, undocumented(fset, f, rel)...)
		}
		for pkg, ok := range hasPackageDoc {
			if !ok {
				misses = append(misses, fmt.Sprintf("%s: package %s has no package comment in any file", dir, pkg))
			}
		}
	}
	sort.Strings(misses)
	t.Logf("checked %d directories under %s", len(byDir), root)
	for _, m := range misses {
		t.Error(m)
	}
}

// TestUndocumentedFindsMisses makes sure the checker itself can fail.
func TestUndocumentedFindsMisses(t *testing.T) {
	const src = `// Package p is documented.
package p

func Bare() {}

// Documented is.
func Documented() {}

type T struct{}

func (T) M() {}

// U is documented.
type U struct{}

func (u *U) N() {}

type unexported struct{}

func (unexported) Exported() {}

// Group doc covers its members.
const (
	A = 1
	B = 2
)

const (
	C = 3 // a line comment is not a doc comment
	// D is documented.
	D = 4
)

var V, w = 1, 2
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	got := undocumented(fset, f, "p.go")
	want := []string{
		"p.go:4: func Bare has no doc comment",
		"p.go:9: type T has no doc comment",
		"p.go:11: method T.M has no doc comment",
		"p.go:16: method U.N has no doc comment",
		"p.go:29: const C has no doc comment",
		"p.go:34: var V has no doc comment",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("undocumented:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
