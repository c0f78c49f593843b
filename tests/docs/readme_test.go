package docs

import (
	"regexp"
	"strings"
	"testing"
)

// The documents, and the headings of the sections, the tests look into.
const (
	docAPI        = "docs/api.md"
	docOperations = "docs/operations.md"

	secAPI     = "API"
	secFlags   = "Flags"
	secMetrics = "Metrics"
	secRunbook = "Operations runbook"
)

// readme returns README.md.
func readme(t *testing.T) string {
	t.Helper()
	return readRepoFile(t, "README.md")
}

// doc returns a document of docs/, given relative to the module root.
func doc(t *testing.T, rel string) string {
	t.Helper()
	return readRepoFile(t, rel)
}

// section returns the text of the "## name" section of a Markdown document,
// up to the next "## " heading (its "### " subsections included).
func section(t *testing.T, doc, name string) string {
	t.Helper()
	s, ok := findSection(doc, name)
	if !ok {
		t.Fatalf("no section %q (a line \"## %s\")", name, name)
	}
	return s
}

// findSection is section without the test: ok is false when there is no
// such heading.
func findSection(doc, name string) (string, bool) {
	lines := strings.Split(doc, "\n")
	start := -1
	fenced := false
	for i, l := range lines {
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(l, "## ") {
			continue
		}
		if start >= 0 {
			return strings.Join(lines[start:i], "\n"), true
		}
		if strings.TrimSpace(strings.TrimPrefix(l, "## ")) == name {
			start = i + 1
		}
	}
	if start < 0 {
		return "", false
	}
	return strings.Join(lines[start:], "\n"), true
}

// tableRows returns the cells of every Markdown table row in text (lines
// starting with '|'), without the header separators (|---|---|). Cells are
// trimmed; a table's header row is returned like any other row.
func tableRows(text string) [][]string {
	var rows [][]string
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, "|") {
			continue
		}
		inner := strings.TrimSuffix(strings.TrimPrefix(l, "|"), "|")
		cells := strings.Split(inner, "|")
		sep := true
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
			if strings.Trim(cells[i], "-: ") != "" {
				sep = false
			}
		}
		if !sep {
			rows = append(rows, cells)
		}
	}
	return rows
}

// codeSpans returns the contents of the `code spans` in s.
func codeSpans(s string) []string {
	var out []string
	for _, m := range codeSpanRE.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

var codeSpanRE = regexp.MustCompile("`([^`]*)`")

// mentionsCode reports whether s holds the code span `want`.
func mentionsCode(s, want string) bool {
	for _, c := range codeSpans(s) {
		if c == want {
			return true
		}
	}
	return false
}

func TestSectionAndTableHelpers(t *testing.T) {
	doc := "# T\n\n## A\none\n```sh\n## not a heading\n```\n### sub\n| a | `b` |\n|---|:-:|\n| c | d |\n## B\ntwo\n"
	a, ok := findSection(doc, "A")
	if !ok || !strings.Contains(a, "## not a heading") || !strings.Contains(a, "### sub") || strings.Contains(a, "two") {
		t.Errorf("section A = %q, %v", a, ok)
	}
	if b, ok := findSection(doc, "B"); !ok || strings.TrimSpace(b) != "two" {
		t.Errorf("section B = %q, %v", b, ok)
	}
	if _, ok := findSection(doc, "C"); ok {
		t.Error("found a section C that does not exist")
	}
	rows := tableRows(a)
	if len(rows) != 2 || rows[0][1] != "`b`" || rows[1][0] != "c" {
		t.Errorf("tableRows = %q", rows)
	}
	if !mentionsCode("x `y` z", "y") || mentionsCode("x y z", "y") {
		t.Error("mentionsCode is wrong")
	}
}
