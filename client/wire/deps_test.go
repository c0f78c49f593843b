package wire

import (
	"os/exec"
	"strings"
	"testing"
)

// The contract builds on the standard library alone: a program in any
// module can import it without taking on a dependency.
func TestDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	got := strings.Fields(string(out))
	if len(got) != 1 || got[0] != "codeberg.org/snowflaked/snowflaked/client/wire" {
		t.Fatalf("wire imports packages outside the standard library: %q (want only wire itself)", got)
	}
	std, err := exec.Command("go", "list", "-deps", "-f", "{{if .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	if !strings.Contains(string(std), "encoding/hex") {
		t.Fatalf("go list found %q: not wire's dependencies", std)
	}
}
