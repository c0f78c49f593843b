package client

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strings"
	"testing"
)

// zeroValue matches a doc comment that says what the field's zero value
// means: "zero", "nil", "empty", or a 0 standing alone ("0:", "(0").
var zeroValue = regexp.MustCompile(`(?i)\b(zero|nil|empty)\b|(^|[\s(])0\b`)

// Every field of Config has a doc comment of its own that says what its
// zero value means.
func TestConfigFieldsDocumentTheirZeroValue(t *testing.T) {
	fields := structFields(t, "client.go", "Config")
	if len(fields) < 12 {
		t.Fatalf("Config has %d fields in client.go, want at least 12: the test reads the wrong struct", len(fields))
	}
	for _, f := range fields {
		for _, name := range f.Names {
			doc := f.Doc.Text()
			switch {
			case doc == "":
				t.Errorf("Config.%s has no doc comment of its own", name.Name)
			case !zeroValue.MatchString(doc):
				t.Errorf("Config.%s: the doc comment %q does not say what its zero value means (zero, nil, empty or 0)", name.Name, doc)
			}
			if len(f.Names) > 1 {
				t.Errorf("Config.%s shares its line and doc comment with %d other fields", name.Name, len(f.Names)-1)
			}
		}
	}
}

// The matcher itself: what it takes for naming a zero value, and what it
// does not.
func TestZeroValueMatcher(t *testing.T) {
	tests := []struct {
		doc  string
		want bool
	}{
		{"Prefetch (0: off).", true},
		{"nil discards everything.", true},
		{"Nil or empty: Discovery gives the nodes.", true},
		{"the zero value has none", true},
		{"default 1000", false},
		{"default 10s, 10ms..1h", false},
		{"at most 1.5", false},
		{"nilpotent", false},
	}
	for _, tc := range tests {
		if got := zeroValue.MatchString(tc.doc); got != tc.want {
			t.Errorf("zeroValue.MatchString(%q) = %v, want %v", tc.doc, got, tc.want)
		}
	}
}

// A call that returns several has the name of the call that returns one,
// and N: every exported method of *Client whose first result is a slice
// ends in N, and the call without the N exists.
func TestPluralCallsEndInN(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	methods := map[string]bool{}
	var plural []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || !fn.Name.IsExported() || !isClientReceiver(fn.Recv) {
				continue
			}
			methods[fn.Name.Name] = true
			if res := fn.Type.Results; res != nil && len(res.List) > 0 {
				if _, ok := res.List[0].Type.(*ast.ArrayType); ok {
					plural = append(plural, fn.Name.Name)
				}
			}
		}
	}
	if len(plural) < 4 {
		t.Fatalf("found the plural calls %q, want at least NextN, NextSegmentN, NextGeneN, NextUUIDN", plural)
	}
	for _, name := range plural {
		switch name {
		case "Nodes", "Subset":
			continue // not calls for IDs
		case "NextSegmentText", "NextSegmentEncoded":
			continue // strings, n always given: named as in every client (Java's nextSegmentText(tag, n))
		}
		one, ok := strings.CutSuffix(name, "N")
		if !ok || !methods[one] {
			t.Errorf("(*Client).%s returns several: want the name of the call that returns one (%s) and N", name, one)
		}
	}
}

func isClientReceiver(recv *ast.FieldList) bool {
	if len(recv.List) != 1 {
		return false
	}
	star, ok := recv.List[0].Type.(*ast.StarExpr)
	if !ok {
		return false
	}
	id, ok := star.X.(*ast.Ident)
	return ok && id.Name == "Client"
}

// structFields parses file and returns the fields of its struct type name.
func structFields(t *testing.T, file, name string) []*ast.Field {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var fields []*ast.Field
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != name {
			return true
		}
		if st, ok := ts.Type.(*ast.StructType); ok {
			fields = st.Fields.List
		}
		return false
	})
	if fields == nil {
		t.Fatalf("no struct %s in %s", name, file)
	}
	return fields
}
