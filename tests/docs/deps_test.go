package docs

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Clock trust (clockguard) links no HTTP server library and not the ID
// library, and the metrics page links none of the parts whose figures it
// renders: it reads the node's snapshot and its counters, not the server,
// the ZooKeeper side or the segment service. docs/design.md's package
// table says the same.
func TestPackageDependencies(t *testing.T) {
	for _, tc := range []struct {
		pkg    string
		deps   bool // go list -deps (everything linked), else the package's own imports
		forbid []string
	}{
		{pkg: "./clockguard", deps: true, forbid: []string{"github.com/valyala/fasthttp", modulePath + "/snowflake"}},
		{pkg: "./internal/metrics", deps: true, forbid: []string{modulePath + "/server", modulePath + "/coordinator", modulePath + "/segment"}},
	} {
		for _, dep := range goList(t, tc.pkg, tc.deps) {
			for _, bad := range tc.forbid {
				if dep == bad || strings.HasPrefix(dep, bad+"/") {
					t.Errorf("%s depends on %s (go list deps=%v)", tc.pkg, dep, tc.deps)
				}
			}
		}
	}
}

// goList returns the import paths go list gives for pkg: its own imports,
// or with deps every package it links.
func goList(t *testing.T, pkg string, deps bool) []string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	args := []string{"list", "-f", `{{join .Imports "\n"}}`, pkg}
	if deps {
		args = []string{"list", "-deps", pkg}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = moduleRoot(t)
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOTOOLCHAIN=local")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	list := strings.Fields(string(out))
	if len(list) == 0 {
		t.Fatalf("go %s listed nothing", strings.Join(args, " "))
	}
	return list
}
