package docs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// moduleName is the module whose root the tests look for.
const moduleName = "snowflaked"

// maxParentDirs bounds the walk up from the test's directory to go.mod.
const maxParentDirs = 10

// moduleRoot returns the directory of the module's go.mod, searched from
// the working directory upwards.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("working directory: %v", err)
	}
	for range maxParentDirs {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		switch {
		case err == nil:
			first, _, _ := strings.Cut(string(b), "\n")
			if strings.TrimSpace(first) != "module "+moduleName {
				t.Fatalf("%s/go.mod starts with %q, want module %s", dir, first, moduleName)
			}
			return dir
		case !errors.Is(err, os.ErrNotExist):
			t.Fatalf("read go.mod: %v", err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	t.Fatalf("no go.mod of module %s above the working directory", moduleName)
	return ""
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
