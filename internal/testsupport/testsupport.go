// Package testsupport holds what the tests of several packages share:
// polling a condition with a bound, a log sink safe for concurrent use, a
// loopback address nobody listens on, whether the race detector is on,
// finding a Debian tool (skip, or fail under CI) and promtool's check of an
// exposition.
// Production code never imports it.
package testsupport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/rs/zerolog"
)

// Poll calls cond every period until it holds, and fails the test with
// what once timeout has passed. It is bounded in count and in time.
func Poll(t testing.TB, timeout, period time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for range int(timeout/period) + 2 {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(period)
	}
	t.Fatalf("not within %v: %s", timeout, what)
}

// SyncBuffer collects output (a logger's) safely across goroutines.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Lines decodes the JSON lines written so far (a zerolog logger's) and
// returns those whose message is msg (every line for ""); a line that is
// not JSON fails the test.
func (s *SyncBuffer) Lines(t testing.TB, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(s.String()) {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %q: %v", line, err)
		}
		if msg == "" || m["message"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// Log is a logger for a test: info and above, with timestamps, to the
// test's log (shown on failure or -v) and to buf when not nil.
func Log(t testing.TB, buf *SyncBuffer) zerolog.Logger {
	t.Helper()
	var w io.Writer = zerolog.NewTestWriter(t)
	if buf != nil {
		w = io.MultiWriter(w, buf)
	}
	return zerolog.New(w).Level(zerolog.InfoLevel).With().Timestamp().Logger()
}

// ClosedAddr returns a 127.0.0.1 address nothing listens on.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// NeedTool returns the path of the first of names found in PATH, a program
// of the Debian package pkg. When none is found it skips the test loudly,
// or fails it with CI=true (CI installs every such package).
func NeedTool(t testing.TB, pkg string, names ...string) string {
	t.Helper()
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := fmt.Sprintf("!!! %s NOT FOUND: install Debian's %s package (apt-get install -y %s): this test did NOT run !!!", strings.Join(names, " or "), pkg, pkg)
	if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
		t.Fatal(msg + " (CI is set: a failure, not a skip)")
	}
	t.Skip(msg)
	return ""
}

// CheckMetrics runs `promtool check metrics` (Prometheus's own linter) on an
// exposition and fails the test with every problem it names.
func CheckMetrics(t testing.TB, exposition string) {
	t.Helper()
	if problems := promtoolProblems(NeedTool(t, "prometheus", "promtool"), exposition); problems != "" {
		t.Errorf("promtool check metrics: %s", problems)
	}
}

// promtoolProblems returns what promtool says about an exposition, with its
// exit status, or "" when it accepts it.
func promtoolProblems(promtool, exposition string) string {
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(exposition)
	out, err := cmd.CombinedOutput()
	if err == nil && len(bytes.TrimSpace(out)) == 0 {
		return ""
	}
	return fmt.Sprintf("%v\n%s", err, out)
}

// ModuleName is the server module, whose root ModuleRoot finds.
const ModuleName = "codeberg.org/snowflaked/snowflaked"

// maxParentDirs bounds ModuleRoot's walk up from the working directory.
const maxParentDirs = 10

// ModuleRoot returns the directory of the server module's go.mod,
// searched from the working directory upwards; it fails the test when
// there is none (or the first go.mod found is another module's).
func ModuleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("working directory: %v", err)
	}
	for range maxParentDirs {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		switch {
		case err == nil:
			first, _, _ := strings.Cut(string(b), "\n")
			if strings.TrimSpace(first) != "module "+ModuleName {
				t.Fatalf("%s/go.mod starts with %q, want module %s", dir, first, ModuleName)
			}
			return dir
		case !errors.Is(err, os.ErrNotExist):
			t.Fatalf("read go.mod: %v", err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	t.Fatalf("no go.mod of module %s above the working directory", ModuleName)
	return ""
}

// GoFiles lists the non-test Go files under the module root, as paths
// relative to it with forward slashes, skipping hidden directories, bin/,
// testdata/ and the directories skip names (relative to the root).
func GoFiles(t testing.TB, skip ...string) []string {
	t.Helper()
	root := ModuleRoot(t)
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin" || d.Name() == "testdata" || slices.Contains(skip, rel)) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(rel, ".go") && !strings.HasSuffix(rel, "_test.go") {
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("list the module's Go files: %v", err)
	}
	return out
}

// HeadingAnchor is the id a Markdown heading gets (GitHub's): lower case,
// punctuation dropped (hyphens and underscores kept), spaces turned into
// hyphens.
func HeadingAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
