package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Paths of the binaries TestMain builds.
var (
	binSnowflaked string // production build
	binChaos      string // -tags chaos
	binCtl        string // snowflakectl
)

// Timeouts: generous because CI machines are slow and race builds slower.
const (
	startTimeout = 30 * time.Second // process start to "snowflaked starting"
	readyTimeout = 30 * time.Second // to /readyz 200
	exitTimeout  = 30 * time.Second // signal to exit
	pollEvery    = 10 * time.Millisecond
)

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "snowflaked-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	binSnowflaked = filepath.Join(dir, "snowflaked")
	binChaos = filepath.Join(dir, "snowflaked-chaos")
	binCtl = filepath.Join(dir, "snowflakectl")
	builds := []struct {
		out, pkg string
		tags     []string
	}{
		{binSnowflaked, "snowflaked/cmd/snowflaked", nil},
		{binChaos, "snowflaked/cmd/snowflaked", []string{"-tags", "chaos"}},
		{binCtl, "snowflaked/cmd/snowflakectl", nil},
	}
	for _, b := range builds {
		args := append([]string{"build", "-o", b.out}, b.tags...)
		if raceEnabled {
			args = append(args, "-race")
		}
		cmd := exec.Command(goTool(), append(args, b.pkg)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: go %s: %v\n%s", strings.Join(cmd.Args[1:], " "), err, out)
			return 1
		}
	}
	return m.Run()
}

// goTool returns the go command of the toolchain running the tests.
func goTool() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// childEnv is the environment of every process under test: a minimal one,
// so the developer's SNOWFLAKED_* variables cannot change a test.
func childEnv() []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	if raceEnabled {
		// Exit at once (the race runtime sleeps 1s at exit by default); a
		// race makes the process fail with status 66.
		env = append(env, "GORACE=atexit_sleep_ms=0 halt_on_error=1")
	}
	return env
}

// syncBuffer collects a process's stderr.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// proc is a running snowflaked.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{} // closed when the process has exited
	err    error         // Wait's result, valid after done
	addr   string        // 127.0.0.1:port it listens on (after waitStarted)
}

// nodeArgs are the flags every test node gets: loopback, a free port, the
// cache file in dir, JSON logs.
func nodeArgs(dir string, worker int, extra ...string) []string {
	args := []string{"--listen", "127.0.0.1:0", "--cache-file", filepath.Join(dir, "cache.json"), "--log-format", "json"}
	if worker >= 0 {
		args = append(args, "--worker-id", strconv.Itoa(worker))
	}
	return append(args, extra...)
}

// start runs bin with args and env (added to a minimal environment) and
// kills it at cleanup if it is still running.
func start(t *testing.T, bin string, args []string, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(childEnv(), env...)
	cmd.Dir = t.TempDir()
	cmd.SysProcAttr = sysProcAttr()
	p := &proc{t: t, cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout = p.stderr
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		if !p.exited() {
			_ = cmd.Process.Kill()
			select {
			case <-p.done:
			case <-time.After(exitTimeout):
				t.Errorf("pid %d did not die after SIGKILL", cmd.Process.Pid)
			}
		}
		if strings.Contains(p.stderr.String(), "WARNING: DATA RACE") {
			t.Errorf("data race in %s", filepath.Base(bin))
		}
		if t.Failed() {
			t.Logf("stderr of pid %d:\n%s", cmd.Process.Pid, p.stderr.String())
		}
	})
	return p
}

// startNode starts a snowflaked and waits until it listens.
func startNode(t *testing.T, bin string, args []string, env ...string) *proc {
	t.Helper()
	p := start(t, bin, args, env...)
	p.waitStarted()
	return p
}

// exited reports whether the process has exited.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitCode waits for the process to exit and returns its status.
func (p *proc) exitCode() int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(exitTimeout):
		p.t.Fatalf("pid %d still running after %s; stderr:\n%s", p.cmd.Process.Pid, exitTimeout, p.stderr.String())
	}
	var ee *exec.ExitError
	switch {
	case p.err == nil:
		return 0
	case errors.As(p.err, &ee):
		return ee.ExitCode()
	}
	p.t.Fatalf("wait: %v", p.err)
	return -1
}

// signal sends sig to the process.
func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal %v: %v", sig, err)
	}
}

// logLines returns the process's JSON log lines, parsed.
func (p *proc) logLines() []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(p.stderr.String()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// findLog returns the first log line whose message is msg.
func (p *proc) findLog(msg string) (map[string]any, bool) {
	for _, m := range p.logLines() {
		if m["message"] == msg {
			return m, true
		}
	}
	return nil, false
}

// waitLog waits for a log line with message msg.
func (p *proc) waitLog(msg string, timeout time.Duration) map[string]any {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if m, ok := p.findLog(msg); ok {
			return m
		}
		if p.exited() {
			p.t.Fatalf("process exited (%v) before logging %q; stderr:\n%s", p.err, msg, p.stderr.String())
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("no log line %q within %s; stderr:\n%s", msg, timeout, p.stderr.String())
		}
		time.Sleep(pollEvery)
	}
}

// waitStarted waits for the startup line and records the listen address.
func (p *proc) waitStarted() map[string]any {
	p.t.Helper()
	m := p.waitLog("snowflaked starting", startTimeout)
	addr, _ := m["listen"].(string)
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		p.t.Fatalf("startup line has listen %q: %v", addr, m)
	}
	p.addr = addr
	return m
}

var client = &http.Client{Timeout: 10 * time.Second}

// get returns status and body of GET path.
func (p *proc) get(path string) (int, string) {
	p.t.Helper()
	return p.do(http.MethodGet, path)
}

func (p *proc) do(method, path string) (int, string) {
	p.t.Helper()
	req, err := http.NewRequest(method, "http://"+p.addr+path, nil)
	if err != nil {
		p.t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		p.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		p.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return resp.StatusCode, string(b)
}

// waitReadyz polls /readyz until it answers want, and returns how long that
// took and the body of the last answer.
func (p *proc) waitReadyz(want int, timeout time.Duration) (time.Duration, string) {
	p.t.Helper()
	start := time.Now()
	for {
		code, body := p.get("/readyz")
		if code == want {
			return time.Since(start), body
		}
		if time.Since(start) > timeout {
			p.t.Fatalf("/readyz still %d %s after %s (want %d)", code, body, timeout, want)
		}
		time.Sleep(pollEvery)
	}
}

// ids fetches count IDs from /ids and checks they increase.
func (p *proc) ids(count int) []int64 {
	p.t.Helper()
	code, body := p.get("/ids?count=" + strconv.Itoa(count))
	if code != http.StatusOK {
		p.t.Fatalf("/ids?count=%d: %d %s", count, code, body)
	}
	out := parseIDs(p.t, body)
	if len(out) != count {
		p.t.Fatalf("/ids?count=%d returned %d IDs", count, len(out))
	}
	return out
}

func parseIDs(t *testing.T, body string) []int64 {
	t.Helper()
	var out []int64
	for _, line := range strings.Fields(body) {
		id, err := strconv.ParseInt(line, 10, 64)
		if err != nil {
			t.Fatalf("ID %q: %v", line, err)
		}
		if len(out) > 0 && id <= out[len(out)-1] {
			t.Fatalf("IDs not increasing: %d after %d", id, out[len(out)-1])
		}
		out = append(out, id)
	}
	return out
}

// decodeMs returns an ID's timestamp in Unix ms under the default layout
// (41/10/12, epoch 2024-01-01), and its worker ID.
func decodeMs(id int64) (unixMs, worker int64) {
	const epochMs = 1704067200000
	return id>>22 + epochMs, (id >> 12) & 1023
}

// number reads a numeric log field.
func number(t *testing.T, m map[string]any, key string) float64 {
	t.Helper()
	v, ok := m[key].(float64)
	if !ok {
		t.Fatalf("log line has no number %q: %v", key, m)
	}
	return v
}

// ctl runs snowflakectl and returns exit code, stdout and stderr.
func ctl(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(binCtl, args...)
	cmd.Env = childEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, stdout.String(), stderr.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), stdout.String(), stderr.String()
	}
	t.Fatalf("snowflakectl: %v", err)
	return -1, "", ""
}
