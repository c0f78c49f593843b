package fencing

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The fencing rules link the node's health state, not the clock
// measurement: no NTP client, no HTTP client for the peer rounds, no
// clockguard.
func TestDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	got := strings.Fields(string(out))
	if !slices.Contains(got, "codeberg.org/snowflaked/snowflaked/fencing") {
		t.Fatalf("go list found %q: not the fencing package's dependencies", got)
	}
	forbidden := []string{
		"codeberg.org/snowflaked/snowflaked/clockguard",
		"github.com/beevik/ntp",
		"github.com/valyala/fasthttp",
	}
	for _, p := range got {
		for _, f := range forbidden {
			if p == f || strings.HasPrefix(p, f+"/") {
				t.Errorf("the fencing package links %s", p)
			}
		}
	}
	t.Logf("%d packages outside the standard library: %s", len(got), strings.Join(got, " "))
}
