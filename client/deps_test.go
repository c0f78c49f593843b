package client

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// A program that imports the client builds none of the server: its
// packages outside the standard library are the client's (with its wire
// contract) and the ZooKeeper client's.
func TestDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	allowed := []string{
		"codeberg.org/snowflaked/snowflaked/client",
		"codeberg.org/snowflaked/snowflaked/client/wire", // standard library only: see wire's own TestDependencies
		"github.com/go-zookeeper/zk",
	}
	var got []string
	for _, p := range strings.Fields(string(out)) {
		got = append(got, p)
		if !slices.ContainsFunc(allowed, func(a string) bool { return p == a || strings.HasSuffix(a, "/") && strings.HasPrefix(p, a) }) {
			t.Errorf("the client imports %s", p)
		}
	}
	if !slices.Contains(got, "github.com/go-zookeeper/zk") {
		t.Fatalf("go list found %q: not the client's dependencies", got)
	}
	t.Logf("%d packages outside the standard library: %s", len(got), strings.Join(got, " "))
}
