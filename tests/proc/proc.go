// Package proc builds the project's binaries and runs them as child processes
// for integration tests: a minimal environment, output captured, JSON log
// lines parsed, the process killed at t.Cleanup (and by the kernel should the
// test binary die first, on Linux).
package proc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ExitTimeout bounds every wait for a process to exit after a signal.
const ExitTimeout = 30 * time.Second

// pollEvery is how often WaitLog looks at the output.
const pollEvery = 10 * time.Millisecond

// failureTailLines is how much of a process's output a failed test shows.
const failureTailLines = 200

// ErrExited is wrapped by the errors of waits that ended because the process
// exited.
var ErrExited = errors.New("process exited")

// GoTool returns the go command of the toolchain running the tests: the
// one `go env GOROOT` of the go on PATH names, or that go itself.
func GoTool() string {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err == nil {
		if p := filepath.Join(strings.TrimSpace(string(out)), "bin", "go"); fileExists(p) {
			return p
		}
	}
	return "go"
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// Build compiles the package pkg (an import path, e.g.
// "codeberg.org/snowflaked/snowflaked/cmd/snowflaked") to dir/name with the extra build flags (e.g.
// "-tags", "chaos"), with -race when the test binary has it, and returns the
// binary's path.
func Build(dir, name, pkg string, flags ...string) (string, error) {
	out := filepath.Join(dir, name)
	args := append([]string{"build", "-o", out}, flags...)
	if Race {
		args = append(args, "-race")
	}
	cmd := exec.Command(GoTool(), append(args, pkg)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %w\n%s", strings.Join(cmd.Args[1:], " "), err, b)
	}
	return out, nil
}

// Env returns a minimal environment (so the developer's variables cannot
// change a test) followed by extra KEY=VALUE entries.
func Env(extra ...string) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	if Race {
		// Exit at once (the race runtime sleeps 1s at exit by default); a
		// race makes the process fail with status 66.
		env = append(env, "GORACE=atexit_sleep_ms=0 halt_on_error=1")
	}
	return append(env, extra...)
}

// Buffer collects a process's output; safe for concurrent use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Proc is a running (or exited) child process.
type Proc struct {
	name string
	cmd  *exec.Cmd
	out  *Buffer
	done chan struct{} // closed when the process has exited
	err  error         // Wait's result, valid after done
}

// Start runs bin with args in a fresh temporary directory, with env as its
// whole environment (see Env), stdout and stderr captured together. name
// labels the process in messages. t.Cleanup kills it if it still runs,
// reports a data race it printed, and shows the tail of its output when the
// test failed.
func Start(t testing.TB, name, bin string, args, env []string) *Proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Dir = t.TempDir()
	cmd.SysProcAttr = sysProcAttr()
	p := &Proc{name: name, cmd: cmd, out: &Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	runtime.LockOSThread() // the parent-death signal fires when the forking thread exits: keep it a live one
	err := cmd.Start()
	runtime.UnlockOSThread()
	if err != nil {
		t.Fatalf("start %s (%s): %v", name, bin, err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		if err := p.Kill(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		if strings.Contains(p.Output(), "WARNING: DATA RACE") {
			t.Errorf("data race in %s:\n%s", name, p.Output())
		} else if t.Failed() {
			t.Logf("last %d lines of %s (pid %d):\n%s", failureTailLines, name, p.Pid(), p.Tail(failureTailLines))
		}
	})
	return p
}

// Name returns the label given to Start.
func (p *Proc) Name() string { return p.name }

// Pid returns the process ID.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig syscall.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("%s: signal %v to pid %d: %w", p.name, sig, p.Pid(), err)
	}
	return nil
}

// Kill sends SIGKILL (kill -9) and waits, up to ExitTimeout, for the process
// to exit. Killing an exited process does nothing.
func (p *Proc) Kill() error {
	if p.Exited() {
		return nil
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("%s: kill pid %d: %w", p.name, p.Pid(), err)
	}
	_, err := p.Wait(ExitTimeout)
	return err
}

// Wait waits up to timeout for the process to exit and returns its exit
// status (-1 when a signal ended it).
func (p *Proc) Wait(timeout time.Duration) (int, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		return 0, fmt.Errorf("%s: pid %d still running after %s", p.name, p.Pid(), timeout)
	}
	var ee *exec.ExitError
	switch {
	case p.err == nil:
		return 0, nil
	case errors.As(p.err, &ee):
		return ee.ExitCode(), nil
	}
	return 0, fmt.Errorf("%s: wait for pid %d: %w", p.name, p.Pid(), p.err)
}

// Output returns everything the process wrote so far.
func (p *Proc) Output() string { return p.out.String() }

// Tail returns the last n lines of the output.
func (p *Proc) Tail(n int) string {
	lines := strings.Split(strings.TrimRight(p.Output(), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// LogLines returns the output's JSON lines, parsed; other lines are skipped.
func (p *Proc) LogLines() []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(p.Output()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// FindLog returns the first JSON log line whose "message" is msg.
func (p *Proc) FindLog(msg string) (map[string]any, bool) {
	for _, m := range p.LogLines() {
		if m["message"] == msg {
			return m, true
		}
	}
	return nil, false
}

// CountLog returns how many JSON log lines have "message" msg.
func (p *Proc) CountLog(msg string) int {
	n := 0
	for _, m := range p.LogLines() {
		if m["message"] == msg {
			n++
		}
	}
	return n
}

// WaitLog waits up to timeout for a JSON log line whose "message" is msg. It
// fails early, wrapping ErrExited, when the process exits first.
func (p *Proc) WaitLog(msg string, timeout time.Duration) (map[string]any, error) {
	return p.WaitLogAfter(msg, 0, timeout)
}

// WaitLogAfter is WaitLog for a line with message msg after the first
// `seen` of them (CountLog before the event that should log one more): the
// line it returns is the first new one.
func (p *Proc) WaitLogAfter(msg string, seen int, timeout time.Duration) (map[string]any, error) {
	deadline := time.Now().Add(timeout)
	for range int(timeout/pollEvery) + 2 { // bounded; the deadline ends it first
		n := 0
		for _, m := range p.LogLines() {
			if m["message"] != msg {
				continue
			}
			if n == seen {
				return m, nil
			}
			n++
		}
		if p.Exited() {
			return nil, fmt.Errorf("%s: %w (%v) before logging %q", p.name, ErrExited, p.err, msg)
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(pollEvery)
	}
	if seen > 0 {
		return nil, fmt.Errorf("%s: no log line %q beyond the %d before, within %s", p.name, msg, seen, timeout)
	}
	return nil, fmt.Errorf("%s: no log line %q within %s", p.name, msg, timeout)
}

// ErrDuplicateKey is wrapped by CheckJSONLine's error for an object that
// names a key twice (encoding/json keeps the last and says nothing).
var ErrDuplicateKey = errors.New("duplicate key")

// CheckJSONLine reports whether line is exactly one JSON object in which no
// object, at any depth, names a key twice.
func CheckJSONLine(line []byte) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("not a JSON object: starts with %v", tok)
	}
	if err := checkObject(dec, "$"); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("more than one JSON value on the line")
	}
	return nil
}

// checkObject reads the rest of an object whose '{' was read, failing on a
// repeated key; path names the object in errors.
func checkObject(dec *json.Decoder, path string) error {
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("not JSON: %w", err)
		}
		key, _ := tok.(string)
		if seen[key] {
			return fmt.Errorf("%w %q in %s", ErrDuplicateKey, key, path)
		}
		seen[key] = true
		if err := checkValue(dec, path+"."+key); err != nil {
			return err
		}
	}
	_, err := dec.Token() // '}'
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return nil
}

// checkValue reads one value, checking the objects inside it.
func checkValue(dec *json.Decoder, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	d, ok := tok.(json.Delim)
	switch {
	case !ok:
		return nil
	case d == '{':
		return checkObject(dec, path)
	case d == '[':
		for i := 0; dec.More(); i++ {
			if err := checkValue(dec, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil { // ']'
			return fmt.Errorf("not JSON: %w", err)
		}
	}
	return nil
}
