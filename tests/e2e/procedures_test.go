package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	testproc "codeberg.org/snowflaked/snowflaked/tests/proc"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// procedure is one "## " section of docs/procedures.md: its title and the
// shell script its sh blocks make, in order.
type procedure struct {
	title, script string
}

// procedures splits docs/procedures.md into its sections and each
// section's sh blocks; the blocks before the first section (the setup
// every rehearsal assumes) begin every section's script.
func procedures(t *testing.T) []procedure {
	t.Helper()
	b, err := os.ReadFile("../../docs/procedures.md")
	if err != nil {
		t.Fatal(err)
	}
	blockRE := regexp.MustCompile("(?s)```sh\n(.*?)```")
	scripts := func(text string) string {
		var s strings.Builder
		for _, m := range blockRE.FindAllStringSubmatch(text, -1) {
			s.WriteString(m[1])
		}
		return s.String()
	}
	parts := strings.Split(string(b), "\n## ")
	setup := scripts(parts[0])
	if setup == "" {
		t.Fatal("docs/procedures.md: no setup block before the first section")
	}
	var out []procedure
	for _, p := range parts[1:] {
		title, body, _ := strings.Cut(p, "\n")
		if s := scripts(body); s != "" {
			out = append(out, procedure{title: title, script: setup + s})
		}
	}
	return out
}

// What each procedure's rehearsal must show, beyond running to its end
// (every command succeeds: the script runs under set -euo pipefail).
var procedureChecks = map[string]func(t *testing.T, out string){
	"Replace a dead node": func(t *testing.T, out string) {
		workers := regexp.MustCompile(`(?m)^worker +(\d+)$`).FindAllStringSubmatch(out, -1)
		if len(workers) < 2 || workers[0][1] != workers[1][1] {
			t.Errorf("the replacement with the same node key should decode to the dead node's worker ID: %q", workers)
		}
		if !strings.Contains(out, "prev_holder_fence") {
			t.Error("probe --wait never showed the replacement waiting for the dead node's fence (prev_holder_fence)")
		}
		if !regexp.MustCompile(`(?m)^\S+\s+rehearse-b\s.*retired`).MatchString(out) {
			t.Error("status shows no retired row for rehearse-b")
		}
	},
	"Rolling upgrade and downgrade": func(t *testing.T, out string) {
		for _, key := range []string{"rehearse-c1", "rehearse-c2"} {
			if !regexp.MustCompile(`(?m)^\d+\s+` + key + `\s+\S+\s+\S+\s+yes\s+yes\s`).MatchString(out) {
				t.Errorf("status has no row for %s holding its lease and in service", key)
			}
		}
		if !strings.Contains(out, "VERSION") || !strings.Contains(out, "REQUIRES") {
			t.Error("the rehearsal shows no VERSION (status) or REQUIRES (cluster list) column")
		}
	},
	"Change a cluster-wide setting": func(t *testing.T, out string) {
		for _, want := range []string{"6h0m0s", `"recycle_after":"6h0m0s"`, "a new cluster"} {
			if !strings.Contains(out, want) {
				t.Errorf("the rehearsal shows no %q (the set value, the node following it, the refusal's reason)", want)
			}
		}
	},
	"Move to a new cluster or layout": func(t *testing.T, out string) {
		if !strings.Contains(out, "the new cluster's IDs are larger") {
			t.Error("the new cluster's first ID was not shown larger")
		}
		// The last cluster list: its clusters, then the tombstones.
		at := strings.LastIndex(out, "Tombstones")
		if at < 0 {
			t.Fatalf("the last cluster list shows no tombstones:\n%s", out)
		}
		list, tombs := out[strings.LastIndex(out[:at], "NAME"):at], out[at:]
		if strings.Contains(list, "rehearse-v1") || !strings.Contains(list, "rehearse-v2") {
			t.Errorf("after the delete, cluster list should show rehearse-v2 and not rehearse-v1:\n%s", list)
		}
		if !strings.Contains(tombs, "rehearse-v1") {
			t.Errorf("after the delete, cluster list should show the tombstone of rehearse-v1:\n%s", tombs)
		}
	},
	"Back up and restore": func(t *testing.T, out string) {
		if !regexp.MustCompile(`tag "rehearse-tag": start 1000, max_id 5000,`).MatchString(out) {
			t.Error("segment status does not show the raised max_id 5000")
		}
	},
}

// Every rehearsal of docs/procedures.md runs as written: its sh blocks,
// after the page's setup block, as one bash script under set -euo
// pipefail, from a directory holding bin/snowflaked and bin/snowflakectl,
// against a fresh ZooKeeper with cluster "default" (what make run starts).
// The documented addresses are rewritten to the harness's: ZooKeeper's
// 127.0.0.1:21810 and the rehearsal ports 8091-8094. Each procedure must
// then show what the page claims (procedureChecks).
func TestIntegration_ProceduresRunAsWritten(t *testing.T) {
	procs := procedures(t)
	if len(procs) != len(procedureChecks) {
		var titles []string
		for _, p := range procs {
			titles = append(titles, p.title)
		}
		t.Fatalf("docs/procedures.md has rehearsals %q; the test checks %d: give each a check", titles, len(procedureChecks))
	}
	for _, p := range procs {
		t.Run(strings.ReplaceAll(p.title, " ", "_"), func(t *testing.T) {
			check, ok := procedureChecks[p.title]
			if !ok {
				t.Fatalf("no check for the rehearsal %q", p.title)
			}
			zk := zkharness.StartStandalone(t)
			if code, out, errOut := ctl(t, "cluster", "create", "default", "--zk", zk.ConnectString()); code != 0 {
				t.Fatalf("cluster create: exit %d: %s%s", code, out, errOut)
			}
			base := freeBlock(t, 4)
			script := strings.ReplaceAll(p.script, "127.0.0.1:21810", zk.ConnectString())
			script = regexp.MustCompile(`\b809([1-4])\b`).ReplaceAllStringFunc(script, func(port string) string {
				return strconv.Itoa(base + int(port[3]-'1'))
			})
			out := runRehearsal(t, script)
			check(t, out)
			if t.Failed() || testing.Verbose() {
				t.Logf("the rehearsal's output:\n%s", out)
			}
		})
	}
}

// runRehearsal runs script with bash in a directory holding bin/snowflaked
// and bin/snowflakectl, and returns its stdout and stderr together. The
// script and every process it started run in a process group of their
// own, killed when the test ends.
func runRehearsal(t *testing.T, script string) string {
	t.Helper()
	root := t.TempDir()
	for name, from := range map[string]string{"snowflaked": binSnowflaked, "snowflakectl": binCtl} {
		if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(from, filepath.Join(root, "bin", name)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/bash", "-euo", "pipefail", "-c", script)
	cmd.Dir, cmd.Env = root, testproc.Env()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	if err := cmd.Wait(); err != nil {
		logs, _ := filepath.Glob(filepath.Join(root, "rehearsal", "*", "log"))
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			t.Logf("%s:\n%s", l, tail(string(b), 20))
		}
		t.Fatalf("the rehearsal failed (%v):\n%s", err, out.String())
	}
	return out.String()
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
