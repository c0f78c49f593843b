package docs

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
)

// markdownFiles are the documents the repository explains itself with.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	entries, err := os.ReadDir(filepath.Join(moduleRoot(t), "docs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".md") {
			files = append(files, "docs/"+e.Name())
		}
	}
	return files
}

var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// anchors returns the ids of a document's headings (outside code blocks).
func anchors(doc string) map[string]bool {
	out := map[string]bool{}
	fenced := false
	for _, l := range strings.Split(doc, "\n") {
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(l, "#") {
			continue
		}
		out[testsupport.HeadingAnchor(strings.TrimSpace(strings.TrimLeft(l, "#")))] = true
	}
	return out
}

// Every link in the README and docs/ points at a file of the repository
// (and a heading of it), never outside: the repository explains itself.
func TestLinksStayInTheRepoAndResolve(t *testing.T) {
	for _, file := range markdownFiles(t) {
		doc := readRepoFile(t, file)
		for _, m := range linkRE.FindAllStringSubmatch(doc, -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				t.Errorf("%s links outside the repository: %s", file, link)
				continue
			}
			target, frag, _ := strings.Cut(link, "#")
			rel := file
			if target != "" {
				rel = path.Clean(path.Join(path.Dir(file), target))
				if strings.HasPrefix(rel, "../") || rel == ".." {
					t.Errorf("%s links outside the repository: %s", file, link)
					continue
				}
				if _, err := os.Stat(filepath.Join(moduleRoot(t), filepath.FromSlash(rel))); err != nil {
					t.Errorf("%s links to %s, which does not exist", file, link)
					continue
				}
			}
			if frag != "" && strings.HasSuffix(rel, ".md") && !anchors(readRepoFile(t, rel))[frag] {
				t.Errorf("%s links to %s: %s has no heading #%s", file, link, rel, frag)
			}
		}
	}
}

func TestAnchor(t *testing.T) {
	for in, want := range map[string]string{
		"Choosing `--zk-fence-ahead`":     "choosing---zk-fence-ahead",
		"Segment mode (short, dense IDs)": "segment-mode-short-dense-ids",
		"Where we differ from SPEC.md":    "where-we-differ-from-specmd",
		"The way back from each reason":   "the-way-back-from-each-reason",
		"`clock_behind_fence`":            "clock_behind_fence",
	} {
		if got := testsupport.HeadingAnchor(in); got != want {
			t.Errorf("HeadingAnchor(%q) = %q, want %q", in, got, want)
		}
	}
}

// pathSpanRE matches a code span that reads as a path in the repository:
// a lower-case first element and at least one slash.
var pathSpanRE = regexp.MustCompile(`^[a-z][a-z0-9_-]*(/[A-Za-z0-9_.*-]+)+/?$`)

// notPaths are code spans of that shape that are not paths here.
var notPaths = map[string]bool{
	"text/plain": true, "application/json": true,
}

// Every path the README and docs/ name in a code span exists (a glob
// pattern matches something): docs that cite a deleted file mislead.
func TestDocsNameExistingPaths(t *testing.T) {
	root := moduleRoot(t)
	ignored := ignoredTopDirs(t)
	for _, file := range markdownFiles(t) {
		for _, span := range codeSpans(readRepoFile(t, file)) {
			if !pathSpanRE.MatchString(span) || notPaths[span] {
				continue
			}
			top, _, _ := strings.Cut(span, "/")
			if ignored[top] {
				continue // built by make (bin/), not in a clone
			}
			if fi, err := os.Stat(filepath.Join(root, top)); err != nil || !fi.IsDir() {
				// Not under a folder of the repository (a znode, a URL path),
				// unless it moved under internal/.
				if _, err := os.Stat(filepath.Join(root, "internal", filepath.FromSlash(span))); err == nil {
					t.Errorf("%s names %s: it is internal/%s now", file, span, span)
				}
				continue
			}
			matches, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(strings.TrimSuffix(span, "/"))))
			if err != nil || len(matches) == 0 {
				t.Errorf("%s names %s, which does not exist", file, span)
			}
		}
	}
}

// ignoredTopDirs are the top-level folders .gitignore names ("/bin/"):
// what make builds there is not in a clone.
func ignoredTopDirs(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, l := range strings.Split(readRepoFile(t, ".gitignore"), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "/") && strings.HasSuffix(l, "/") && strings.Count(l, "/") == 2 {
			out[strings.Trim(l, "/")] = true
		}
	}
	if !out["bin"] {
		t.Fatalf(".gitignore does not name /bin/: %v", out)
	}
	return out
}
