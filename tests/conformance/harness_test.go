package conformance

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
	testproc "codeberg.org/snowflaked/snowflaked/tests/proc"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

const moduleName = testsupport.ModuleName

// Bounds: generous, for a race build on two shared cores.
const (
	startTimeout  = 30 * time.Second // process start to its "starting" log line
	readyTimeout  = 30 * time.Second // to 200 on /readyz
	answerTimeout = 60 * time.Second // one driver request (a load included)
	pollEvery     = 20 * time.Millisecond
)

// The binaries TestMain builds.
var binSnowflaked, binCtl, binGoDriver string

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "snowflaked-conformance-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	for _, b := range []struct {
		out       *string
		name, pkg string
	}{
		{&binSnowflaked, "snowflaked", moduleName + "/cmd/snowflaked"},
		{&binCtl, "snowflakectl", moduleName + "/cmd/snowflakectl"},
		{&binGoDriver, "godriver", moduleName + "/tests/conformance/godriver"},
	} {
		if *b.out, err = testproc.Build(dir, b.name, b.pkg); err != nil {
			fmt.Fprintln(os.Stderr, "conformance:", err)
			return 1
		}
	}
	return m.Run()
}

// node is one snowflaked process of the suite.
type node struct {
	p    *testproc.Proc
	addr string // host:port it serves on
}

// startNode starts the production snowflaked with args (plus loopback, a
// free port, a cache file and JSON logs) and waits until /readyz answers
// 200 (over HTTPS with hc when hc is not nil).
func startNode(t *testing.T, hc *http.Client, args ...string) *node {
	t.Helper()
	scheme := "http"
	if hc == nil {
		hc = plainHTTP
	} else {
		scheme = "https"
	}
	args = append([]string{"--listen", "127.0.0.1:0", "--cache-file", filepath.Join(t.TempDir(), "cache.json"), "--log-format", "json"}, args...)
	p := testproc.Start(t, "snowflaked", binSnowflaked, args, testproc.Env())
	m, err := p.WaitLog("snowflaked starting", startTimeout)
	if err != nil {
		t.Fatalf("%v; output:\n%s", err, p.Output())
	}
	addr, _ := m["listen"].(string)
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("start line has listen %q: %v", addr, m)
	}
	testsupport.Poll(t, readyTimeout, pollEvery, "node "+addr+" ready", func() bool {
		code, _ := get(hc, scheme+"://"+addr+"/readyz", "")
		return code == http.StatusOK
	})
	return &node{p: p, addr: addr}
}

var plainHTTP = &http.Client{Timeout: 10 * time.Second}

// get returns the status and body of a GET (0 on a transport error).
func get(hc *http.Client, u, token string) (int, string) {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return 0, err.Error()
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b)
}

// ctl runs snowflakectl and returns its stdout; a non-zero exit fails the
// test.
func ctl(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(binCtl, args...)
	cmd.Env = testproc.Env()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("snowflakectl %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// startZK starts a standalone ZooKeeper for the suite.
func startZK(t *testing.T) *zkharness.Cluster {
	t.Helper()
	zkharness.Require(t)
	return zkharness.StartStandalone(t)
}

// recorded is one request a recordingProxy passed on.
type recorded struct {
	method, path, rawQuery string
	header                 http.Header
	status                 int
}

// recordingProxy stands in front of a node and keeps every request a
// client made through it, for the check against docs/openapi.yaml.
type recordingProxy struct {
	addr string
	srv  *http.Server

	mu  sync.Mutex
	log []recorded
}

func startProxy(t *testing.T, target string) *recordingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rp := &recordingProxy{addr: ln.Addr().String()}
	up := &url.URL{Scheme: "http", Host: target}
	proxy := httputil.NewSingleHostReverseProxy(up)
	proxy.ModifyResponse = func(resp *http.Response) error {
		r := resp.Request
		rp.mu.Lock()
		rp.log = append(rp.log, recorded{method: r.Method, path: r.URL.Path, rawQuery: r.URL.RawQuery, header: r.Header.Clone(), status: resp.StatusCode})
		rp.mu.Unlock()
		return nil
	}
	rp.srv = &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = rp.srv.Serve(ln) }()
	t.Cleanup(func() { _ = rp.srv.Close() })
	return rp
}

// take returns the requests recorded since the last take and forgets them.
func (rp *recordingProxy) take() []recorded {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	l := rp.log
	rp.log = nil
	return l
}

// hungListener accepts connections and never answers: a node that hangs.
func hungListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// driver is one client's conformance driver process (README.md).
type driver struct {
	t     *testing.T
	name  string
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan []byte
	errs  *testsupport.SyncBuffer
	seq   int64
}

func startDriver(t *testing.T, name string, dir string, argv ...string) *driver {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = os.Environ()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d := &driver{t: t, name: name, cmd: cmd, in: in, lines: make(chan []byte, 16), errs: &testsupport.SyncBuffer{}}
	cmd.Stderr = d.errs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s driver %v: %v", name, argv, err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 256<<20)
		for sc.Scan() {
			d.lines <- append([]byte(nil), sc.Bytes()...)
		}
		close(d.lines)
	}()
	t.Cleanup(func() {
		in.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	return d
}

// answer is a driver's answer line.
type answer struct {
	Seq      int64             `json:"seq"`
	Event    string            `json:"event"`
	Error    *callError        `json:"error"`
	IDs      []string          `json:"ids"`
	UUID     string            `json:"uuid"`
	Nodes    []string          `json:"nodes"`
	Decoded  map[string]*int64 `json:"decoded"`
	Threads  [][]string        `json:"threads"`
	Failures []callError       `json:"failures"`
	Calls    int64             `json:"calls"`
	Client   string            `json:"client"`
	Routes   []string          `json:"routes"`
	Codes    []string          `json:"codes"`
	Text     string            `json:"text"`   // encode
	Value    string            `json:"value"`  // decode_string
	Texts    []string          `json:"texts"`  // next_segment_text
	Bounds   *boundsAnswer     `json:"bounds"` // bounds
}

// boundsAnswer is a bounds op's answer, and the fields of a node's GET
// /bounds that it mirrors.
type boundsAnswer struct {
	FromMS  int64  `json:"from_ms"`
	ToMS    int64  `json:"to_ms"`
	MinID   string `json:"min_id"`
	MaxID   string `json:"max_id"`
	MinUUID string `json:"min_uuid"`
	MaxUUID string `json:"max_uuid"`
}

// callError is the protocol's error object.
type callError struct {
	Type    string `json:"type"`
	Status  int    `json:"status"`
	Code    string `json:"code"`
	Max     *int   `json:"max"`
	Message string `json:"message"`
}

func (e *callError) String() string {
	if e == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%s (status %d, code %q): %s", e.Type, e.Status, e.Code, e.Message)
}

// do sends one request and returns its answer; onEvent, when not nil, is
// called for each event line before it. A driver that dies or does not
// answer within answerTimeout fails the test.
func (d *driver) do(req map[string]any, onEvent func(string)) answer {
	d.t.Helper()
	d.seq++
	req["seq"] = d.seq
	b, err := json.Marshal(req)
	if err != nil {
		d.t.Fatal(err)
	}
	if _, err := d.in.Write(append(b, '\n')); err != nil {
		d.t.Fatalf("%s driver: write %s: %v; stderr:\n%s", d.name, b, err, d.errs.String())
	}
	timer := time.NewTimer(answerTimeout)
	defer timer.Stop()
	for {
		select {
		case line, ok := <-d.lines:
			if !ok {
				d.t.Fatalf("%s driver exited before answering %s; stderr:\n%s", d.name, b, d.errs.String())
			}
			var a answer
			if err := json.Unmarshal(line, &a); err != nil {
				d.t.Fatalf("%s driver wrote %q, not a JSON answer: %v", d.name, line, err)
			}
			if a.Seq != d.seq {
				d.t.Fatalf("%s driver answered seq %d to seq %d: %s", d.name, a.Seq, d.seq, line)
			}
			if a.Event != "" {
				if onEvent != nil {
					onEvent(a.Event)
				}
				continue
			}
			if a.Error != nil && a.Error.Type == "driver" {
				d.t.Fatalf("%s driver could not carry out %s: %s", d.name, b, a.Error.Message)
			}
			return a
		case <-timer.C:
			d.t.Fatalf("%s driver: no answer to %s within %s; stderr:\n%s", d.name, b, answerTimeout, d.errs.String())
		}
	}
}

// ok sends a request that must succeed and returns its answer.
func (d *driver) ok(req map[string]any) answer {
	d.t.Helper()
	a := d.do(req, nil)
	if a.Error != nil {
		d.t.Fatalf("%s: %v: %s", d.name, req, a.Error)
	}
	return a
}

// open builds the driver's client with cfg.
func (d *driver) open(cfg map[string]any) {
	d.t.Helper()
	d.ok(map[string]any{"op": "open", "config": cfg})
}

// parseIDs reads decimal IDs.
func parseIDs(t *testing.T, ss []string) []int64 {
	t.Helper()
	out := make([]int64, len(ss))
	for i, s := range ss {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v <= 0 {
			t.Fatalf("ID %q is not a positive 63-bit decimal: %v", s, err)
		}
		out[i] = v
	}
	return out
}
