package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// docs/client.md's first example runs as written against a cluster like
// the one `make run` starts (ZooKeeper, nodes on 8081 and 8082, the tag
// demo it creates), the seeds rewritten to the harness's nodes: compiled
// into a program of its own, it exits 0 and prints what the docs say it
// prints (on make run it once printed `0 [] 0`, its errors discarded).
func TestIntegration_DocsClientExampleRunsAsWritten(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "client.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```go\n(func example\\(ctx context.Context\\) error \\{.*?\n\\})\n```").FindSubmatch(b)
	if m == nil {
		t.Fatal("docs/client.md: no ```go block with func example(ctx context.Context) error")
	}
	code := string(m[1])
	for _, s := range []string{`"127.0.0.1:8081"`, `"demo"`} {
		if !strings.Contains(code, s) {
			t.Fatalf("docs/client.md's example does not use make run's %s:\n%s", s, code)
		}
	}
	if regexp.MustCompile(`, _ :?= `).MatchString(code) {
		t.Errorf("docs/client.md's example discards an error:\n%s", code)
	}

	zk := zkharness.StartStandalone(t)
	var nodes []*proc
	for i := range 2 {
		p := startNode(t, binSnowflaked, clusterArgs(t.TempDir(), zk.ConnectString(), "default", fmt.Sprintf("client-doc-%d", i)))
		p.waitReadyz(http.StatusOK, readyTimeout)
		nodes = append(nodes, p)
	}
	// As scripts/run.sh creates it.
	if c, out, errOut := ctl(t, "segment", "create", "demo", "--zk", zk.ConnectString(), "--start", "1000", "--step", "100"); c != 0 {
		t.Fatalf("segment create demo: exit %d %s %s", c, out, errOut)
	}
	code = strings.NewReplacer("127.0.0.1:8081", nodes[0].addr, "127.0.0.1:8082", nodes[1].addr).Replace(code)

	// A package of the module (so the client resolves through its
	// replace), in a directory the go tool's ./... skips.
	dir, err := os.MkdirTemp(".", "_clientexample-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	prog := `package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"codeberg.org/snowflaked/snowflaked/client"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := example(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		os.Exit(1)
	}
}

var _ = slog.Default

` + code + "\n"
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(prog), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*60*1e9)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "run", "./"+filepath.Base(dir))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("docs/client.md's example: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	// "It prints one line, e.g. `ID 500 true N 20 UUID`".
	shown := regexp.MustCompile("It prints one line, e\\.g\\. `([^`]+)`").FindSubmatch(b)
	if shown == nil {
		t.Fatal("docs/client.md does not show what its example prints")
	}
	got := strings.TrimSpace(stdout.String())
	uuidRE := `[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}`
	if !regexp.MustCompile(`^[0-9]+ 500 true [0-9]+ 20 `+uuidRE+`$`).MatchString(got) ||
		!sameShape(string(shown[1]), regexp.MustCompile(uuidRE).ReplaceAllString(got, "019abc12-3456-7def-8123-456789abcdef"), false) {
		t.Errorf("the example printed %q; the docs show %q", got, shown[1])
	}
}
