package snowflake_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The ID library is usable from outside the module: nothing its exported
// API names (a function's parameters and results, an exported type, an
// exported field, a variable or constant's type) comes from a package under
// internal/, which another module cannot import.
func TestExportedAPINamesNoInternalPackage(t *testing.T) {
	for _, dir := range []string{".", "../uuidv7"} {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			for _, bad := range internalNamesInAPI(t, dir) {
				t.Errorf("%s: the exported API names %s, from an internal package", dir, bad)
			}
		})
	}
}

// The check itself catches an internal type in an exported signature.
func TestInternalNamesInAPICatchesOne(t *testing.T) {
	src := `package p
import (
	"example.com/m/internal/clock"
	ok "example.com/m/public"
)
type Config struct {
	Clock clock.Clock
	Other ok.Thing
	hidden clock.Clock
}
func New(c clock.Clock) ok.Thing { return ok.Thing{} }
func inner(c clock.Clock) {}
`
	got := internalNamesInFile(t, token.NewFileSet(), "p.go", src)
	want := []string{"Config.Clock: clock.Clock", "New: clock.Clock"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("found %q, want %q", got, want)
	}
}

func internalNamesInAPI(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		bad = append(bad, internalNamesInFile(t, fset, f, nil)...)
	}
	return bad
}

// internalNamesInFile lists "decl: pkg.Name" for each name from an internal
// package in an exported declaration of the file.
func internalNamesInFile(t *testing.T, fset *token.FileSet, name string, src any) []string {
	t.Helper()
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	internal := map[string]bool{}
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if !strings.Contains("/"+path+"/", "/internal/") {
			continue
		}
		local := path[strings.LastIndex(path, "/")+1:]
		if imp.Name != nil {
			local = imp.Name.Name
		}
		internal[local] = true
	}
	var bad []string
	check := func(where string, n ast.Node) {
		if n == nil {
			return
		}
		ast.Inspect(n, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && internal[id.Name] {
					bad = append(bad, where+": "+id.Name+"."+sel.Sel.Name)
				}
			}
			return true
		})
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Name.IsExported() && (d.Recv == nil || exportedRecv(d.Recv)) {
				check(d.Name.Name, d.Type)
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						checkType(s.Name.Name, s.Type, check)
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() {
							check(n.Name, s.Type)
						}
					}
				}
			}
		}
	}
	return bad
}

// checkType checks a type's exported parts: a struct's exported fields
// (embedded ones too), an interface's methods, any other type whole.
func checkType(name string, typ ast.Expr, check func(string, ast.Node)) {
	st, ok := typ.(*ast.StructType)
	if !ok {
		check(name, typ)
		return
	}
	for _, fld := range st.Fields.List {
		if len(fld.Names) == 0 {
			check(name+" (embedded)", fld.Type)
			continue
		}
		for _, n := range fld.Names {
			if n.IsExported() {
				check(name+"."+n.Name, fld.Type)
			}
		}
	}
}

func exportedRecv(recv *ast.FieldList) bool {
	if len(recv.List) == 0 {
		return false
	}
	t := recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if ix, ok := t.(*ast.IndexExpr); ok {
		t = ix.X
	}
	id, ok := t.(*ast.Ident)
	return ok && id.IsExported()
}
