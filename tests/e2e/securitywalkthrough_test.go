package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// walkthroughBlocks returns the bash blocks of docs/security.md marked
// "<!-- walkthrough: terminal N -->", by N.
func walkthroughBlocks(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range regexp.MustCompile("(?s)<!-- walkthrough: terminal (\\d) -->\n```bash\n(.*?)```").FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = m[2]
	}
	if out["1"] == "" || out["2"] == "" {
		t.Fatalf("docs/security.md: no walkthrough blocks for terminals 1 and 2 (found %d)", len(out))
	}
	return out
}

// bashScript runs script with bash -euo pipefail in dir, in a process
// group of its own that is killed when it returns (what it left in the
// background: the walkthrough's Prometheus), and returns its output.
func bashScript(t *testing.T, dir, script string, timeout time.Duration) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.CombinedOutput()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	return string(out), err
}

// docs/security.md's walkthrough, as written, from a tree like a fresh
// clone after `make build` (scripts/run.sh, deploy/prometheus and the
// binaries): the certificate commands of terminal 1, then `RUN_TLS=1 make
// run` (scripts/run.sh with RUN_TLS=1, on free ports, kept running), then
// terminal 2's block with the documented addresses rewritten to the ones
// this run got: an ID over mutual TLS, a refusal without a client
// certificate, snowflakectl status over both TLS connections, a token tag
// and its IDs, and Prometheus scraping the three nodes over HTTPS with the
// shipped scrape config.
func TestIntegration_SecurityWalkthrough(t *testing.T) {
	zkharness.Require(t)
	testsupport.NeedTool(t, "prometheus", "prometheus")
	testsupport.NeedTool(t, "curl", "curl")
	start := time.Now()
	blocks := walkthroughBlocks(t)
	root := makeRunTree(t)
	shipped, err := os.ReadFile("../../deploy/prometheus/scrape-https.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "deploy/prometheus"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "deploy/prometheus/scrape-https.yml"), shipped, 0o644); err != nil {
		t.Fatal(err)
	}

	// Terminal 1: up to `RUN_TLS=1 make run`, its last line. `make build`
	// is done (the test's binaries are in bin/).
	lines := strings.Split(strings.TrimSpace(blocks["1"]), "\n")
	if last := lines[len(lines)-1]; last != "RUN_TLS=1 make run" {
		t.Fatalf("terminal 1 ends with %q, want RUN_TLS=1 make run", last)
	}
	var certCmds []string
	for _, l := range lines[:len(lines)-1] {
		if l != "make build" {
			certCmds = append(certCmds, l)
		}
	}
	if out, err := bashScript(t, root, strings.Join(certCmds, "\n"), time.Minute); err != nil {
		t.Fatalf("terminal 1's certificate commands: %v\n%s", err, out)
	}
	base := freeBlock(t, 3)
	run := startMakeRun(t, root, "RUN_TLS=1", "RUN_KEEP=1", fmt.Sprintf("RUN_BASE_PORT=%d", base))
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(run.Output(), "Running until Ctrl-C") {
		if run.Exited() || time.Now().After(deadline) {
			t.Fatalf("RUN_TLS=1 make run did not come up:\n%s", run.Output())
		}
		time.Sleep(100 * time.Millisecond)
	}
	out := run.Output()
	if !strings.Contains(out, "Certificates: .run/certs (made before") {
		t.Errorf("make run did not use the walkthrough's certificates:\n%s", out)
	}
	m := regexp.MustCompile(`serves TLS clients \(mutual TLS\) on (127\.0\.0\.1:\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("make run names no ZooKeeper TLS port:\n%s", out)
	}
	for _, want := range []string{"curl --cacert .run/certs/ca.crt --cert .run/certs/ops.crt --key .run/certs/ops.key 'https://127.0.0.1:" + strconv.Itoa(base) + "/ids?count=3'",
		"; to restart it by hand: (cd ", "pid "} {
		if !strings.Contains(out, want) {
			t.Errorf("make run's output lacks %q:\n%s", want, out)
		}
	}

	// Terminal 2, its addresses rewritten to this run's.
	script := blocks["2"]
	promPort := freeBlock(t, 1)
	for from, to := range map[string]string{
		"127.0.0.1:21811": m[1],
		"127.0.0.1:8081":  fmt.Sprintf("127.0.0.1:%d", base),
		"127.0.0.1:9090":  fmt.Sprintf("127.0.0.1:%d", promPort),
	} {
		if !strings.Contains(script, from) {
			t.Fatalf("terminal 2 has no %s to rewrite", from)
		}
		script = strings.ReplaceAll(script, from, to)
	}
	got, err := bashScript(t, root, script, 90*time.Second)
	if err != nil {
		t.Fatalf("terminal 2: %v\n%s\nmake run:\n%s", err, got, run.Output())
	}
	checks := []struct{ what, re string }{
		{"an ID over mutual TLS", `(?m)^\d{15,}$`},
		{"the refusal without a client certificate", `(?m)^refused: no client certificate$`},
		{"status over ZooKeeper TLS and HTTPS", `3 in service`},
		{"the token tag's IDs", `(?m)^1\n2\n3$`},
		{"the HTTPS scrape of each node", `(?s)("instance":"127\.0\.0\.1:\d+".*"1"\].*){3}`},
	}
	for _, c := range checks {
		if !regexp.MustCompile(c.re).MatchString(got) {
			t.Errorf("terminal 2's output shows no %s (%s):\n%s", c.what, c.re, got)
		}
	}
	t.Logf("the walkthrough took %s", time.Since(start).Round(100*time.Millisecond))
}
