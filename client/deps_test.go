package client

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// A program that imports the client builds nothing outside the standard
// library but the client module's own packages: the core, its wire
// contract, its text encodings (client/idtext) and its rendezvous hashing
// (client/internal/rendezvous). Following ZooKeeper (the subpackage zkdiscovery) adds the
// ZooKeeper client, and only there.
func TestDependencies(t *testing.T) {
	const (
		core = "codeberg.org/snowflaked/snowflaked/client"
		wire = "codeberg.org/snowflaked/snowflaked/client/wire" // standard library only: see wire's own TestDependencies
		zkd  = "codeberg.org/snowflaked/snowflaked/client/zkdiscovery"
		zk   = "github.com/go-zookeeper/zk"
		zkt  = "codeberg.org/snowflaked/snowflaked/client/zktls"  // standard library and tlspem only
		pem  = "codeberg.org/snowflaked/snowflaked/client/tlspem" // standard library only
		rdv  = "codeberg.org/snowflaked/snowflaked/client/internal/rendezvous"
		idt  = "codeberg.org/snowflaked/snowflaked/client/idtext" // standard library only
	)
	tests := []struct {
		pkg  string
		want []string // the packages outside the standard library, sorted
	}{
		{".", []string{core, idt, rdv, wire}},
		{"./zkdiscovery", []string{core, idt, rdv, pem, wire, zkd, zkt, zk}},
		{"./idtext", []string{idt}},
		{"./internal/rendezvous", []string{rdv}},
		{"./zktls", []string{pem, zkt}},
		{"./tlspem", []string{pem}},
	}
	for _, tt := range tests {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", tt.pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", tt.pkg, err)
		}
		got := strings.Fields(string(out))
		slices.Sort(got)
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s builds %q outside the standard library, want %q", tt.pkg, got, tt.want)
		}
	}
}
