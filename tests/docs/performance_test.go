package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// performancePage is the page scripts/perfpage.sh writes.
const performancePage = "docs/performance.md"

// performancePeers are the libraries the generator is measured against:
// each has at least one row in the page's generator table.
var performancePeers = []string{"bwmarrin/snowflake", "sony/sonyflake v2"}

var (
	benchNameRE   = regexp.MustCompile(`\bBenchmark[A-Za-z0-9_]+`)
	makeTargetRE  = regexp.MustCompile(`(?m)^([A-Za-z0-9_-]+):([^=]|$)`)
	makeCallRE    = regexp.MustCompile(`\bmake ([a-z][a-z0-9-]*)`)
	scriptPathRE  = regexp.MustCompile(`\bscripts/[A-Za-z0-9_.-]+\.sh\b`)
	benchFlagRE   = regexp.MustCompile(`-bench '([^']*)'`)
	goTestPkgRE   = regexp.MustCompile(`\s(\./[A-Za-z0-9_/.-]*)\s*$`)
	funcBenchDecl = regexp.MustCompile(`(?m)^func (Benchmark[A-Za-z0-9_]+)\(b \*testing\.B\)`)
)

// splitTableRow returns the cells of a Markdown table row, split at the
// '|' not escaped as "\|" (a regexp in a code span), unescaped and trimmed.
func splitTableRow(line string) []string {
	inner := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(line), "|"), "|")
	parts := strings.Split(strings.ReplaceAll(inner, `\|`, "\x00"), "|")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(strings.ReplaceAll(p, "\x00", "|"))
	}
	return parts
}

// benchmarkFuncs returns the names of every benchmark function declared in
// a _test.go file of the repository.
func benchmarkFuncs(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	root := moduleRoot(t)
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && p != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range funcBenchDecl.FindAllStringSubmatch(string(b), -1) {
			out[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// makeTargets returns the Makefile's targets.
func makeTargets(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, m := range makeTargetRE.FindAllStringSubmatch(readRepoFile(t, "Makefile"), -1) {
		out[m[1]] = true
	}
	return out
}

// Everything docs/performance.md names exists: each `make` target in the
// Makefile, each script, each benchmark as a func in a test file (a renamed
// benchmark fails here), and the page says how to regenerate it.
func TestPerformancePageNamesWhatExists(t *testing.T) {
	page := readRepoFile(t, performancePage)
	targets := makeTargets(t)
	for _, m := range makeCallRE.FindAllStringSubmatch(page, -1) {
		if !targets[m[1]] {
			t.Errorf("%s names `make %s`: no such target in the Makefile", performancePage, m[1])
		}
	}
	for _, s := range scriptPathRE.FindAllString(page, -1) {
		if _, err := os.Stat(filepath.Join(moduleRoot(t), s)); err != nil {
			t.Errorf("%s names %s: %v", performancePage, s, err)
		}
	}
	benches := benchmarkFuncs(t)
	seen := map[string]bool{}
	for _, b := range benchNameRE.FindAllString(page, -1) {
		if !benches[b] && !seen[b] {
			seen[b] = true
			t.Errorf("%s names %s: no func %s(b *testing.B) in any test file", performancePage, b, b)
		}
	}
	for _, want := range []string{"make perf-page", "scripts/perfpage.sh"} {
		if !strings.Contains(page, want) {
			t.Errorf("%s does not say how to regenerate it (%q)", performancePage, want)
		}
	}
}

// The script's own rows name benchmarks that exist too, so that renaming
// one fails before the page is regenerated.
func TestPerfPageScriptNamesExistingBenchmarks(t *testing.T) {
	script := readRepoFile(t, "scripts/perfpage.sh")
	benches := benchmarkFuncs(t)
	named := benchNameRE.FindAllString(script, -1)
	if len(named) == 0 {
		t.Fatal("scripts/perfpage.sh names no benchmark")
	}
	for _, b := range named {
		if !benches[b] {
			t.Errorf("scripts/perfpage.sh names %s: no func %s(b *testing.B) in any test file", b, b)
		}
	}
	for _, p := range performancePeers {
		if !strings.Contains(script, `"`+p+";") {
			t.Errorf("scripts/perfpage.sh has no row for %s", p)
		}
	}
}

// The generator table has a row per peer, each with a ratio, a spread and
// a `go test` command whose -bench pattern matches the row's two
// benchmarks in a package directory that exists.
func TestPerformancePageGeneratorTable(t *testing.T) {
	sec := section(t, readRepoFile(t, performancePage), "Generator")
	rows := 0
	seen := map[string]int{}
	for _, l := range strings.Split(sec, "\n") {
		cells := splitTableRow(l)
		if !strings.HasPrefix(strings.TrimSpace(l), "|") || len(cells) < 10 || cells[0] == "peer" || strings.Trim(cells[0], "-") == "" {
			continue
		}
		rows++
		seen[cells[0]]++
		checkGeneratorRow(t, cells)
	}
	if rows == 0 {
		t.Fatalf("%s: the generator table has no rows", performancePage)
	}
	for _, p := range performancePeers {
		if seen[p] == 0 {
			t.Errorf("%s: no generator row for %s (rows for %v)", performancePage, p, seen)
		}
	}
}

// checkGeneratorRow checks one row of the generator table: peer, ours,
// peer's benchmark, -cpu, ours ns/ID, peer ns/ID, ratio, spread, what it
// measures, command.
func checkGeneratorRow(t *testing.T, cells []string) {
	t.Helper()
	for i, name := range map[int]string{6: "ratio", 7: "spread", 9: "command"} {
		if cells[i] == "" {
			t.Errorf("%s: row %q has no %s", performancePage, cells[0], name)
		}
	}
	cmd := strings.Trim(cells[9], "`")
	if !strings.HasPrefix(cmd, "go test ") {
		t.Errorf("%s: row %q: command %q is not a go test command", performancePage, cells[0], cmd)
		return
	}
	m := benchFlagRE.FindStringSubmatch(cmd)
	if m == nil {
		t.Errorf("%s: row %q: command %q has no -bench '...'", performancePage, cells[0], cmd)
		return
	}
	re, err := regexp.Compile(m[1])
	if err != nil {
		t.Errorf("%s: row %q: -bench %q: %v", performancePage, cells[0], m[1], err)
		return
	}
	for _, b := range []string{strings.Trim(cells[1], "`"), strings.Trim(cells[2], "`")} {
		if !re.MatchString(b) {
			t.Errorf("%s: row %q: -bench %q does not match %s", performancePage, cells[0], m[1], b)
		}
	}
	if p := goTestPkgRE.FindStringSubmatch(cmd); p == nil {
		t.Errorf("%s: row %q: command %q names no ./package", performancePage, cells[0], cmd)
	} else if _, err := os.Stat(filepath.Join(moduleRoot(t), p[1])); err != nil {
		t.Errorf("%s: row %q: %v", performancePage, cells[0], err)
	}
}

// The HTTP figures are on the page, or a section says they are not yet.
func TestPerformancePageHTTPSection(t *testing.T) {
	page := readRepoFile(t, performancePage)
	if _, ok := findSection(page, "HTTP: not measured by this page yet"); ok {
		return
	}
	sec := section(t, page, "HTTP")
	if !strings.Contains(sec, "| bare fasthttp") {
		t.Errorf("%s: the HTTP section has no row against bare fasthttp", performancePage)
	}
}

func TestSplitTableRow(t *testing.T) {
	got := splitTableRow("| a | `x\\|y` | c |")
	if len(got) != 3 || got[0] != "a" || got[1] != "`x|y`" || got[2] != "c" {
		t.Errorf("splitTableRow = %q, want [a `x|y` c]", got)
	}
}
