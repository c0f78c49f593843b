package e2e

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
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

// makeRunTree is a copy of what `make run` uses (scripts/run.sh and the
// binaries in bin/), in a directory of its own: the script's .run
// directories go there, not into the repository.
func makeRunTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, f := range []struct{ from, to string }{
		{"../../scripts/run.sh", "scripts/run.sh"},
		{binSnowflaked, "bin/snowflaked"},
		{binCtl, "bin/snowflakectl"},
	} {
		b, err := os.ReadFile(f.from)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(root, f.to)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// freeBlock returns a base port whose n ports are free on 127.0.0.1.
// It draws from 23000-31999: below Linux's ephemeral range (32768 up), where
// any outgoing connection may take a port between this check and the
// node's listen, and above the ZooKeeper ports make run picks (21810 up).
func freeBlock(t *testing.T, n int) int {
	t.Helper()
	for range 200 {
		base := 23000 + rand.IntN(9000)
		free := true
		for i := range n {
			ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(base+i))
			if err != nil {
				free = false
				break
			}
			_ = ln.Close()
		}
		if free {
			return base
		}
	}
	t.Fatalf("no %d free ports in a row", n)
	return 0
}

// startMakeRun runs scripts/run.sh in root with env, and stops it (SIGTERM:
// its trap stops the nodes and ZooKeeper) when the test ends.
func startMakeRun(t *testing.T, root string, env ...string) *testproc.Proc {
	t.Helper()
	p := testproc.Start(t, "make run", "/bin/bash", []string{filepath.Join(root, "scripts/run.sh")}, testproc.Env(env...))
	t.Cleanup(func() {
		if !p.Exited() {
			_ = p.Signal(syscall.SIGTERM)
			_, _ = p.Wait(60 * time.Second)
		}
	})
	return p
}

// What the first cluster has on disk that a second must leave alone.
type runFiles struct{ zooCfg, nodeLog []byte }

func readRunFiles(t *testing.T, dir string) runFiles {
	t.Helper()
	cfg, err1 := os.ReadFile(filepath.Join(dir, "zk/zoo.cfg"))
	log, err2 := os.ReadFile(filepath.Join(dir, "node-1.log"))
	if err1 != nil || err2 != nil {
		t.Fatalf("read %s: %v, %v", dir, err1, err2)
	}
	return runFiles{cfg, log}
}

// `make run` twice: the second never touches the first. Given the first's
// ports it refuses before writing anything, naming free ports; run as
// advised it takes a directory of its own; the first cluster keeps serving,
// its files intact.
func TestIntegration_MakeRunTwice(t *testing.T) {
	zkharness.Require(t)
	root := makeRunTree(t)
	base := freeBlock(t, 3)
	first := startMakeRun(t, root, "RUN_KEEP=1", fmt.Sprintf("RUN_BASE_PORT=%d", base))
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(first.Output(), "Running until Ctrl-C") {
		if first.Exited() || time.Now().After(deadline) {
			t.Fatalf("the first make run did not come up:\n%s", first.Output())
		}
		time.Sleep(100 * time.Millisecond)
	}
	runDir := filepath.Join(root, ".run")
	before := readRunFiles(t, runDir)

	port := checkMakeRunRefused(t, root, base)
	checkMakeRunAsAdvised(t, root, port)

	// The first is untouched and serves.
	after := readRunFiles(t, runDir)
	if !bytes.Equal(after.zooCfg, before.zooCfg) {
		t.Errorf("the first cluster's zoo.cfg changed:\n%s\nwas:\n%s", after.zooCfg, before.zooCfg)
	}
	if !bytes.HasPrefix(after.nodeLog, before.nodeLog) || bytes.IndexByte(after.nodeLog, 0) >= 0 {
		t.Errorf("the first cluster's node-1.log was rewritten (%d bytes before, %d after)", len(before.nodeLog), len(after.nodeLog))
	}
	checkMakeRunsAtOnce(t, root)

	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", base))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the first cluster's node 1 after the second run: %v %v", resp, err)
	}
	_ = resp.Body.Close()
	if err := first.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, err := first.Wait(time.Minute); err != nil || code != 0 {
		t.Errorf("the first make run after SIGTERM: exit %d (%v)", code, err)
	}
}

// checkMakeRunRefused runs make run in root on the ports from base, which
// a running make run has: it must be refused, write nothing, and advise a
// base port, which it returns.
func checkMakeRunRefused(t *testing.T, root string, base int) string {
	t.Helper()
	second := startMakeRun(t, root, fmt.Sprintf("RUN_BASE_PORT=%d", base))
	if code, err := second.Wait(time.Minute); err != nil || code != 1 {
		t.Fatalf("make run on busy ports: exit %d (%v), want 1:\n%s", code, err, second.Output())
	}
	advice := regexp.MustCompile(`nothing was started or written; try RUN_BASE_PORT=(\d+) make run`).FindStringSubmatch(second.Output())
	if advice == nil {
		t.Fatalf("no advice in:\n%s", second.Output())
	}
	if _, err := os.Stat(filepath.Join(root, ".run-2")); !os.IsNotExist(err) {
		t.Errorf("the refused run created .run-2 (%v)", err)
	}
	return advice[1]
}

// checkMakeRunAsAdvised runs make run in root on the advised base port,
// beside a running one: it takes its own directory and its own ZooKeeper,
// then stops.
func checkMakeRunAsAdvised(t *testing.T, root, port string) {
	t.Helper()
	third := startMakeRun(t, root, "RUN_BASE_PORT="+port)
	if code, err := third.Wait(2 * time.Minute); err != nil || code != 0 {
		t.Fatalf("make run as advised: exit %d (%v):\n%s", code, err, third.Output())
	}
	out := third.Output()
	for _, want := range []string{".run is in use by another make run", "data and log: .run-2/zk", "node 1 serves on http://127.0.0.1:" + port} {
		if !strings.Contains(out, want) {
			t.Errorf("the second run's output lacks %q:\n%s", want, out)
		}
	}
}

// checkMakeRunsAtOnce starts two more make runs in root at once, beside a
// running one: each waits for the other to be listening before it picks
// ports, so they take different ones, and different directories.
func checkMakeRunsAtOnce(t *testing.T, root string) {
	t.Helper()
	fourth, fifth := startMakeRun(t, root), startMakeRun(t, root)
	served := map[string]bool{}
	for _, p := range []*testproc.Proc{fourth, fifth} {
		if code, err := p.Wait(3 * time.Minute); err != nil || code != 0 {
			t.Fatalf("make run started beside another: exit %d (%v):\n%s", code, err, p.Output())
		}
		m := regexp.MustCompile(`node 1 serves on (http://\S+)  \(log: (\S+)/node-1.log`).FindStringSubmatch(p.Output())
		if m == nil {
			t.Fatalf("no node address in:\n%s", p.Output())
		}
		if served[m[1]] || served[m[2]] {
			t.Errorf("two runs started at once share %s or %s", m[1], m[2])
		}
		served[m[1]], served[m[2]] = true, true
	}
}

// `make run` with RUN_KEEP=1, two nodes killed together with SIGKILL: the
// script reports each, how it died and its command line to restart it by
// hand, and keeps ZooKeeper and the third node serving; with every node
// killed it keeps ZooKeeper for nodes restarted by hand, until Ctrl-C.
func TestIntegration_MakeRunKillNode(t *testing.T) {
	zkharness.Require(t)
	root := makeRunTree(t)
	base := freeBlock(t, 3)
	run := startMakeRun(t, root, "RUN_KEEP=1", fmt.Sprintf("RUN_BASE_PORT=%d", base))
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(run.Output(), "Running until Ctrl-C") {
		if run.Exited() || time.Now().After(deadline) {
			t.Fatalf("make run did not come up:\n%s", run.Output())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Each node's pid and command line.
	pids := map[int]int{}
	for i := 1; i <= 3; i++ {
		m := regexp.MustCompile(fmt.Sprintf(`(?m)^  pid (\d+): bin/snowflaked --zk 127\.0\.0\.1:\d+ --listen 127\.0\.0\.1:%d --cache-file \.run/node-%d/cache\.json +2>>\.run/node-%d\.log$`, base+i-1, i, i)).FindStringSubmatch(run.Output())
		if m == nil {
			t.Fatalf("no command line for node %d in:\n%s", i, run.Output())
		}
		pids[i], _ = strconv.Atoi(m[1])
	}

	// Nodes 1 and 2 die together: each is reported, with its command line.
	for _, i := range []int{1, 2} {
		if err := syscall.Kill(pids[i], syscall.SIGKILL); err != nil {
			t.Fatalf("kill -9 node %d (pid %d): %v", i, pids[i], err)
		}
	}
	for _, i := range []int{1, 2} {
		report := fmt.Sprintf("run: node %d (pid %d, http://127.0.0.1:%d) exited: exit status 137 (killed by SIGKILL)", i, pids[i], base+i-1)
		deadline = time.Now().Add(10 * time.Second)
		for !strings.Contains(run.Output(), report) {
			if run.Exited() || time.Now().After(deadline) {
				t.Fatalf("no report %q (make run exited: %v):\n%s", report, run.Exited(), run.Output())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if !strings.Contains(run.Output(), "; 1 of 3 nodes still run") {
		t.Errorf("the reports do not count the one node left:\n%s", run.Output())
	}
	if !strings.Contains(run.Output(), "run: to restart it by hand (from "+root+"): bin/snowflaked --zk ") {
		t.Errorf("the report lacks a command line:\n%s", run.Output())
	}

	// Node 3 keeps serving, for longer than the script used to take to
	// stop the others after a node died.
	client := &http.Client{Timeout: 2 * time.Second}
	for until := time.Now().Add(3 * time.Second); time.Now().Before(until); time.Sleep(200 * time.Millisecond) {
		resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/id", base+2))
		if err != nil {
			t.Fatalf("node 3 after nodes 1 and 2 were killed: %v\n%s", err, run.Output())
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("node 3 after nodes 1 and 2 were killed: GET /id %d\n%s", resp.StatusCode, run.Output())
		}
		if run.Exited() {
			t.Fatalf("make run exited after two nodes died:\n%s", run.Output())
		}
	}

	// The last one dies too: make run keeps ZooKeeper up for nodes
	// restarted by hand, until Ctrl-C.
	checkZooKeeperOutlivesNodes(t, run, pids[3])

	// Ctrl-C (SIGTERM here) still stops what is left, exit 0.
	if err := run.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, err := run.Wait(time.Minute); err != nil || code != 0 {
		t.Errorf("make run after SIGTERM: exit %d (%v):\n%s", code, err, run.Output())
	}
	for _, i := range []int{1, 3} {
		if syscall.Kill(pids[i], 0) == nil {
			t.Errorf("node %d (pid %d) still runs after make run stopped", i, pids[i])
		}
	}
}

// checkZooKeeperOutlivesNodes kills last, the last node run still runs,
// and checks that run says so and keeps ZooKeeper serving (for nodes
// restarted by hand) instead of exiting.
func checkZooKeeperOutlivesNodes(t *testing.T, run *testproc.Proc, last int) {
	t.Helper()
	if err := syscall.Kill(last, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 the last node (pid %d): %v", last, err)
	}
	const kept = "run: every node it started has exited"
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(run.Output(), kept) {
		if run.Exited() || time.Now().After(deadline) {
			t.Fatalf("no %q (make run exited: %v):\n%s", kept, run.Exited(), run.Output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	zkAddr := regexp.MustCompile(`bin/snowflaked --zk (127\.0\.0\.1:\d+)`).FindStringSubmatch(run.Output())
	if zkAddr == nil {
		t.Fatalf("no ZooKeeper address in:\n%s", run.Output())
	}
	for until := time.Now().Add(2 * time.Second); time.Now().Before(until); time.Sleep(200 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", zkAddr[1], time.Second)
		if err != nil {
			t.Fatalf("ZooKeeper at %s after every node exited: %v\n%s", zkAddr[1], err, run.Output())
		}
		_ = c.Close()
		if run.Exited() {
			t.Fatalf("make run exited when its last node did:\n%s", run.Output())
		}
	}
}
