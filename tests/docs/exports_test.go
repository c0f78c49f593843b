package docs

import (
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// maxUnusedExports bounds the exported identifiers of the server module that
// no other package uses. An export is API: outside the ID libraries a
// package exports what another package (or a program) calls, and keeps the
// rest to itself.
const maxUnusedExports = 120

// modulePath is the server module's import path.
const modulePath = "codeberg.org/snowflaked/snowflaked"

// exportCounted reports whether the exports of the package at path count
// toward the bound: the module's packages, less the ID libraries (snowflake,
// uuidv7: their API is for programs outside the module), the mains, the
// tests' harnesses and support packages, the in-memory ZooKeeper (a fake the
// simulations drive) and the client module (a library of its own).
func exportCounted(path string) bool {
	rel, ok := strings.CutPrefix(path, modulePath+"/")
	if !ok || strings.HasPrefix(rel, "client") {
		return false
	}
	if rel == "snowflake" || rel == "uuidv7" || strings.HasPrefix(rel, "cmd/") || strings.HasPrefix(rel, "tests/") {
		return false
	}
	return !strings.Contains(rel, "testsupport") && !strings.HasSuffix(rel, "test") && rel != "internal/zkconn/zkmem"
}

// dynamicMethods are method names that packages outside the module call
// through their own interfaces (error, fmt.Stringer, json.Marshaler, ...):
// such a method is used though no package of the module names it.
var dynamicMethods = map[string]bool{
	"Error": true, "Unwrap": true, "Is": true, "As": true, "String": true, "GoString": true,
	"Format": true, "MarshalJSON": true, "UnmarshalJSON": true, "MarshalText": true,
	"UnmarshalText": true, "ServeHTTP": true, "Read": true, "Write": true, "Close": true,
	"Len": true, "Less": true, "Swap": true, "Timeout": true, "Temporary": true,
	"MarshalZerologObject": true, "Set": true, "Get": true,
}

// exportUse is what one load of the module found: its exported objects
// (package-level names and methods of the counted packages) and the objects
// some other package uses.
type exportUse struct {
	exported map[types.Object]string // object -> "pkg.Name" or "pkg.Type.Method"
	used     map[types.Object]bool
	ifaces   []*types.Interface // every interface type the module declares
}

// loadExports loads the module's packages and their tests under one set of
// build tags and records exports and cross-package uses.
func loadExports(t *testing.T, root, tags string) exportUse {
	t.Helper()
	cfg := &packages.Config{
		Mode: packages.NeedName | packages.NeedTypes | packages.NeedTypesInfo | packages.NeedSyntax |
			packages.NeedImports | packages.NeedDeps,
		Dir:   root,
		Tests: true,
		Env:   append(os.Environ(), "GOFLAGS=-tags="+tags),
	}
	pkgs, err := packages.Load(cfg, "./...")
	if err != nil {
		t.Fatalf("load ./... (tags %q): %v", tags, err)
	}
	eu := exportUse{exported: map[types.Object]string{}, used: map[types.Object]bool{}}
	seen := map[*packages.Package]bool{}
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		if seen[p] || !strings.HasPrefix(p.PkgPath, modulePath) || p.Types == nil {
			return
		}
		seen[p] = true
		if len(p.Errors) > 0 {
			t.Errorf("package %s (tags %q): %v", p.PkgPath, tags, p.Errors[0])
			return
		}
		eu.collect(p)
	})
	return eu
}

// collect records p's exports (when counted) and its uses of other
// packages' objects.
func (eu *exportUse) collect(p *packages.Package) {
	self := strings.TrimSuffix(p.PkgPath, "_test")
	if exportCounted(p.PkgPath) && !strings.HasSuffix(p.Name, "_test") {
		scope := p.Types.Scope()
		for _, name := range scope.Names() {
			obj := scope.Lookup(name)
			if obj.Exported() {
				eu.exported[obj] = shortPkg(p.PkgPath) + "." + name
			}
			tn, ok := obj.(*types.TypeName)
			if !ok {
				continue
			}
			if named, ok := tn.Type().(*types.Named); ok {
				for i := 0; i < named.NumMethods(); i++ {
					if m := named.Method(i); m.Exported() && tn.Exported() {
						eu.exported[m] = shortPkg(p.PkgPath) + "." + name + "." + m.Name()
					}
				}
			}
		}
	}
	for _, obj := range p.TypesInfo.Defs {
		if tn, ok := obj.(*types.TypeName); ok {
			if it, ok := tn.Type().Underlying().(*types.Interface); ok {
				eu.ifaces = append(eu.ifaces, it)
			}
		}
	}
	other := func(obj types.Object) bool {
		return obj != nil && obj.Pkg() != nil && obj.Pkg().Path() != self
	}
	for id, obj := range p.TypesInfo.Uses {
		if other(obj) && eu.counts(p, id.Pos()) {
			eu.markUsed(obj)
		}
	}
	for e, sel := range p.TypesInfo.Selections {
		if other(sel.Obj()) && eu.counts(p, e.Pos()) {
			eu.markUsed(sel.Obj())
			eu.markType(sel.Recv())
		}
	}
}

// counts reports whether a use at pos counts: a use in a test file does
// not (an export only a test calls is not API).
func (eu *exportUse) counts(p *packages.Package, pos token.Pos) bool {
	return !strings.HasSuffix(p.Fset.Position(pos).Filename, "_test.go")
}

// markUsed marks obj used, and the module's named types its type mentions
// (a function's results, a variable's type): a program that calls a
// function uses the type it returns, named or not.
func (eu *exportUse) markUsed(obj types.Object) {
	if eu.used[obj] {
		return
	}
	eu.used[obj] = true
	eu.markType(obj.Type())
}

// markType marks the named types of typ (through pointers, slices, maps,
// channels and signatures) used.
func (eu *exportUse) markType(typ types.Type) {
	switch t := typ.(type) {
	case *types.Named:
		if !eu.used[t.Obj()] {
			eu.used[t.Obj()] = true
		}
	case *types.Pointer:
		eu.markType(t.Elem())
	case *types.Slice:
		eu.markType(t.Elem())
	case *types.Array:
		eu.markType(t.Elem())
	case *types.Map:
		eu.markType(t.Key())
		eu.markType(t.Elem())
	case *types.Chan:
		eu.markType(t.Elem())
	case *types.Signature:
		for _, tup := range []*types.Tuple{t.Params(), t.Results()} {
			for i := 0; i < tup.Len(); i++ {
				eu.markType(tup.At(i).Type())
			}
		}
	}
}

// shortPkg is a package path without the module prefix.
func shortPkg(path string) string {
	return strings.TrimPrefix(path, modulePath+"/")
}

// unusedExports returns, sorted, the exported identifiers of the counted
// packages that no other package uses in any of the three builds (default,
// chaos, mutation). A method counts as used when another package calls it,
// when a package outside the module calls it through an interface of its own
// (dynamicMethods), or when its type implements an interface of the module
// that declares it.
func unusedExports(t *testing.T, root string) []string {
	t.Helper()
	builds := []exportUse{loadExports(t, root, ""), loadExports(t, root, "chaos"), loadExports(t, root, "mutation")}
	usedName := map[string]bool{}
	exported := map[string]types.Object{}
	for _, eu := range builds {
		for obj, name := range eu.exported {
			exported[name] = obj
			if eu.used[obj] || implementsUsed(eu, obj) {
				usedName[name] = true
			}
		}
		for obj := range eu.used {
			if name, ok := eu.exported[obj]; ok {
				usedName[name] = true
			}
		}
	}
	var out []string
	for name, obj := range exported {
		if usedName[name] {
			continue
		}
		if fn, ok := obj.(*types.Func); ok && fn.Type().(*types.Signature).Recv() != nil && dynamicMethods[fn.Name()] {
			continue
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// implementsUsed reports whether obj is a method whose type implements an
// interface of the module that has a method of that name: the method is
// called through the interface.
func implementsUsed(eu exportUse, obj types.Object) bool {
	fn, ok := obj.(*types.Func)
	if !ok {
		return false
	}
	recv := fn.Type().(*types.Signature).Recv()
	if recv == nil {
		return false
	}
	for _, it := range eu.ifaces {
		if it.NumMethods() == 0 {
			continue
		}
		has := false
		for i := 0; i < it.NumMethods(); i++ {
			has = has || it.Method(i).Name() == fn.Name()
		}
		if !has {
			continue
		}
		rt := recv.Type()
		if ptr, ok := rt.(*types.Pointer); ok {
			rt = ptr.Elem()
		}
		if types.Implements(rt, it) || types.Implements(types.NewPointer(rt), it) {
			return true
		}
	}
	return false
}

// TestExportsAreUsed bounds the exported identifiers no other package uses
// (maxUnusedExports): each one is API without a caller. EXPORTS_LIST=1 lists
// them all.
func TestExportsAreUsed(t *testing.T) {
	if testing.Short() {
		t.Skip("loads and type-checks the module three times")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	unused := unusedExports(t, root)
	if os.Getenv("EXPORTS_LIST") != "" {
		for _, u := range unused {
			t.Log(u)
		}
	}
	t.Logf("%d exported identifiers used by no other package (bound %d)", len(unused), maxUnusedExports)
	if len(unused) > maxUnusedExports {
		t.Errorf("%d exported identifiers are used by no other package, more than %d: unexport them or move "+
			"them under internal/ (EXPORTS_LIST=1 go test -run TestExportsAreUsed -v ./tests/docs/ lists them); "+
			"the first: %s", len(unused), maxUnusedExports, strings.Join(unused[:min(10, len(unused))], ", "))
	}
}
