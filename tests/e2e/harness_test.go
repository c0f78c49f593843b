package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	testproc "codeberg.org/snowflaked/snowflaked/tests/proc"
)

// Paths of the binaries TestMain builds.
var (
	binSnowflaked string // production build
	binChaos      string // -tags chaos
	binCtl        string // snowflakectl
	oldBinDir     string // where old releases are built (downgrade tests), removed at exit
)

// Timeouts: generous because CI machines are slow and race builds slower.
// A signalled process gets testproc.ExitTimeout to exit.
const (
	startTimeout = 30 * time.Second // process start to "snowflaked starting"
	readyTimeout = 30 * time.Second // to /readyz 200
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
	oldBinDir = dir
	builds := []struct {
		bin       *string
		name, pkg string
		flags     []string
	}{
		{&binSnowflaked, "snowflaked", "codeberg.org/snowflaked/snowflaked/cmd/snowflaked", nil},
		{&binChaos, "snowflaked-chaos", "codeberg.org/snowflaked/snowflaked/cmd/snowflaked", []string{"-tags", "chaos"}},
		{&binCtl, "snowflakectl", "codeberg.org/snowflaked/snowflaked/cmd/snowflakectl", nil},
	}
	for _, b := range builds {
		if *b.bin, err = testproc.Build(dir, b.name, b.pkg, b.flags...); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
	}
	return m.Run()
}

// proc is a running snowflaked under one test; its
// helpers fail the test instead of returning errors.
type proc struct {
	*testproc.Proc
	t    *testing.T
	addr string // 127.0.0.1:port it listens on (after waitStarted)
	// https, when set, is the client of a node serving --tls-cert: the
	// helpers ask it over HTTPS with it.
	https *http.Client
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

// start runs bin with args and env (added to a minimal environment, so the
// developer's SNOWFLAKED_* variables cannot change a test) and kills it at
// cleanup if it is still running.
func start(t *testing.T, bin string, args []string, env ...string) *proc {
	t.Helper()
	return &proc{Proc: testproc.Start(t, filepath.Base(bin), bin, args, testproc.Env(env...)), t: t}
}

// startNode starts a snowflaked and waits until it listens.
func startNode(t *testing.T, bin string, args []string, env ...string) *proc {
	t.Helper()
	p := start(t, bin, args, env...)
	p.waitStarted()
	return p
}

// exitCode waits for the process to exit and returns its status.
func (p *proc) exitCode() int {
	p.t.Helper()
	code, err := p.Wait(testproc.ExitTimeout)
	if err != nil {
		p.t.Fatalf("%v; stderr:\n%s", err, p.Output())
	}
	return code
}

// signal sends sig to the process.
func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
}

// waitLog waits for a log line with message msg.
func (p *proc) waitLog(msg string, timeout time.Duration) map[string]any {
	p.t.Helper()
	m, err := p.WaitLog(msg, timeout)
	if err != nil {
		p.t.Fatalf("%v; stderr:\n%s", err, p.Output())
	}
	return m
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
	scheme, c := "http://", client
	if p.https != nil {
		scheme, c = "https://", p.https
	}
	req, err := http.NewRequest(method, scheme+p.addr+path, nil)
	if err != nil {
		p.t.Fatal(err)
	}
	resp, err := c.Do(req)
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
	cmd.Env = testproc.Env()
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
