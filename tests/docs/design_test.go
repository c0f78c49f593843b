package docs

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
)

// The map of the code in docs/design.md names every package of the
// repository, and only packages that exist.
func TestDesignPackageTable(t *testing.T) {
	table := section(t, doc(t, "docs/design.md"), "The code in one picture")
	named := designTablePackages(table)
	if len(named) < 10 {
		t.Fatalf("found %d packages in the table: %v", len(named), named)
	}
	have := map[string]bool{}
	for _, p := range goPackageDirs(t) {
		have[p] = true
		if !named[p] {
			t.Errorf("docs/design.md's package table does not name package %s", p)
		}
	}
	for p := range named {
		if !have[p] {
			t.Errorf("docs/design.md's package table names %s, which is no package of the repository", p)
		}
	}
}

// designTablePackages returns the packages the first cell of each table row
// names, in backquotes ("`client` (module)", "`internal/cliflag`, `internal/envflag`").
func designTablePackages(table string) map[string]bool {
	out := map[string]bool{}
	cell := regexp.MustCompile("`([a-z0-9/]+)`")
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first := strings.SplitN(line[1:], "|", 2)[0]
		for _, m := range cell.FindAllStringSubmatch(first, -1) {
			out[m[1]] = true
		}
	}
	return out
}

// goPackageDirs lists the directories, relative to the repository root,
// that hold a non-test Go file, outside tests/ and testdata (the tests'
// harnesses are described in prose).
func goPackageDirs(t *testing.T) []string {
	t.Helper()
	root := moduleRoot(t)
	set := map[string]bool{}
	for _, f := range testsupport.GoFiles(t, "tests") {
		set[path.Dir(f)] = true
	}
	var out []string
	for p := range set {
		if p != "." && !isToolDir(root, p) {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// isToolDir reports whether dir holds only build-tagged helper programs
// (a //go:build ignore file), not a package.
func isToolDir(root, dir string) bool {
	files, _ := filepath.Glob(filepath.Join(root, dir, "*.go"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil || !strings.Contains(string(b), "//go:build ignore") {
			return false
		}
	}
	return len(files) > 0
}
