package idtext

import (
	"os/exec"
	"strings"
	"testing"
)

// The codec builds on the standard library alone, like client/wire: the
// server, the client and any program can import it for free.
func TestDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	got := strings.Fields(string(out))
	if len(got) != 1 || got[0] != "codeberg.org/snowflaked/snowflaked/client/idtext" {
		t.Fatalf("idtext imports packages outside the standard library: %q", got)
	}
}
