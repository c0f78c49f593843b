package docs

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// snippetDocs are the documents whose ```go blocks are compiled.
var snippetDocs = []string{"README.md", "docs/api.md", "docs/client.md", "docs/leaf.md", "docs/operations.md", "docs/segment-mode.md"}

// snippetParams are the names a snippet may use without declaring them,
// with the types an application has for them: a context, and a user ID
// kept as IDs are, an int64.
const snippetParams = "ctx context.Context, userID int64"

// snippetImports are the packages the docs' Go examples may use, each
// used once so that none is an unused import.
const snippetImports = `import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"codeberg.org/snowflaked/snowflaked/client"
	"codeberg.org/snowflaked/snowflaked/client/wire"
	"codeberg.org/snowflaked/snowflaked/client/zkdiscovery"
)

var (
	_ = context.Background
	_ = errors.Is
	_ = fmt.Println
	_ = slog.Default
	_ = client.New
	_ = wire.PathIDs
	_ = zkdiscovery.New
)
`

// goBlock is one ```go block of a document.
type goBlock struct {
	where string // file:line of its first line
	code  string
}

// goBlocks returns the ```go blocks of the documents.
func goBlocks(t *testing.T, docs []string) []goBlock {
	t.Helper()
	var out []goBlock
	re := regexp.MustCompile("(?s)```go\n(.*?)```")
	for _, rel := range docs {
		text := readRepoFile(t, rel)
		for _, m := range re.FindAllStringSubmatchIndex(text, -1) {
			line := strings.Count(text[:m[2]], "\n") + 1
			out = append(out, goBlock{where: fmt.Sprintf("%s:%d", rel, line), code: text[m[2]:m[3]]})
		}
	}
	return out
}

// snippetFunc returns a block of top-level declarations as it is, and
// wraps a block of statements into a function of
// snippetParams returning error, with every variable the block declares at
// its top level used once at the end (a snippet shows results it does not
// use), so that only what an application would get wrong fails to compile.
func snippetFunc(name string, b goBlock) (string, error) {
	if _, err := parser.ParseFile(token.NewFileSet(), b.where, "package p\n"+b.code, 0); err == nil {
		return fmt.Sprintf("//line %s\n%s\n", b.where, b.code), nil // declarations: as they are
	}
	body := fmt.Sprintf("func %s(%s) error {\n%s\n}", name, snippetParams, b.code)
	f, err := parser.ParseFile(token.NewFileSet(), b.where, "package p\n"+body, 0)
	if err != nil {
		return "", fmt.Errorf("%s: not Go statements: %w", b.where, err)
	}
	var uses []string
	seen := map[string]bool{}
	for _, st := range f.Decls[0].(*ast.FuncDecl).Body.List {
		as, ok := st.(*ast.AssignStmt)
		if !ok || as.Tok != token.DEFINE {
			continue
		}
		for _, l := range as.Lhs {
			if id, ok := l.(*ast.Ident); ok && id.Name != "_" && !seen[id.Name] {
				seen[id.Name] = true
				uses = append(uses, "\t_ = "+id.Name+"\n")
			}
		}
	}
	return fmt.Sprintf("// %s is %s.\nfunc %s(%s) error {\n//line %s\n%s\n%s\treturn nil\n}\n", name, b.where, name, snippetParams, b.where, b.code, strings.Join(uses, "")), nil
}

// The Go examples of the docs compile against the client as it is: each
// ```go block becomes a function (of ctx and an int64 userID) in a package
// of a scratch module that uses the repository's client module, and
// `go vet` builds and checks it. A call with the wrong types (a user ID
// passed where the client wants a uint64 gene) fails here.
func TestGoSnippetsCompile(t *testing.T) {
	blocks := goBlocks(t, snippetDocs)
	if len(blocks) < 2 {
		t.Fatalf("found %d ```go blocks in %v, want those of README.md and docs/client.md", len(blocks), snippetDocs)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	root := moduleRoot(t)
	clientMod, err := os.ReadFile(filepath.Join(root, "client", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	clientSum, err := os.ReadFile(filepath.Join(root, "client", "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	// The scratch module requires what the client requires (offline: the
	// module cache has them, the client builds), plus the client itself.
	reqs := regexp.MustCompile(`(?m)^\t(\S+ v\S+)`).FindAllStringSubmatch(string(clientMod), -1)
	var mod strings.Builder
	fmt.Fprintf(&mod, "module docsnippets\n\ngo 1.26.0\n\nrequire (\n\t%s/client v0.0.0\n", moduleName)
	for _, r := range reqs {
		fmt.Fprintf(&mod, "\t%s\n", r[1])
	}
	fmt.Fprintf(&mod, ")\n\nreplace %s/client => %s\n", moduleName, filepath.Join(root, "client"))

	var src strings.Builder
	fmt.Fprintf(&src, "// Package snippets holds the ```go blocks of the docs.\npackage snippets\n\n%s\n", snippetImports)
	for i, b := range blocks {
		fn, err := snippetFunc(fmt.Sprintf("snippet%d", i), b)
		if err != nil {
			t.Error(err)
			continue
		}
		src.WriteString(fn + "\n")
	}
	dir := t.TempDir()
	for name, data := range map[string]string{"go.mod": mod.String(), "go.sum": string(clientSum), "snippets.go": src.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "vet", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("the docs' Go examples do not compile against the client (go vet: %v):\n%s", err, out)
	}
}

// The wrapper of TestGoSnippetsCompile: declared results are used, so a
// snippet that only shows them compiles, and nothing else is added.
func TestSnippetFunc(t *testing.T) {
	for _, tc := range []struct {
		name, code string
		want       []string
		wantErr    bool
	}{
		{"results used once", "id, err := c.Next(ctx)\nids, err := c.NextN(ctx, 5)", []string{"_ = id\n", "_ = err\n", "_ = ids\n"}, false},
		{"blank and nested left alone", "_, err := f()\nif err != nil {\n\tx := 1\n\treturn err\n}", []string{"_ = err\n"}, false},
		{"not Go", "id, err := := c.Next(ctx)", nil, true},
		{"declarations as they are", "func f(ctx context.Context) error {\n\tid, err := c.Next(ctx)\n\treturn err\n}", []string{"func f(ctx context.Context) error {\n"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := snippetFunc("s", goBlock{where: "x.md:1", code: tc.code})
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			for _, w := range tc.want {
				if strings.Count(got, w) != 1 {
					t.Errorf("%q has %q %d times, want once", got, w, strings.Count(got, w))
				}
			}
			if strings.Contains(got, "_ = x\n") || strings.Contains(got, "_ = _\n") {
				t.Errorf("%q uses a nested or blank name", got)
			}
		})
	}
}
