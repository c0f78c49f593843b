// Package chromium runs headless Chromium for integration tests of HTML
// pages: the rendered DOM (--dump-dom) and screenshots. Tests that need it
// call Need first: it skips loudly when Chromium is missing, and fails when
// CI=true (CI must run them).
package chromium

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Path is Debian's chromium (scripts/install-deps.sh installs it).
const Path = "/usr/bin/chromium"

// ScreenshotDirEnv, when set, names a directory tests copy their
// screenshots to with Keep (t.TempDir is removed when a test ends).
const ScreenshotDirEnv = "SNOWFLAKED_SCREENSHOT_DIR"

// RunTimeout bounds one Chromium run.
const RunTimeout = time.Minute

// Flags are the flags of every run: headless, no sandbox (tests may run as
// root), no GPU, and nothing that talks to the network by itself.
var Flags = []string{
	"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
	"--disable-background-networking", "--disable-component-update", "--disable-sync",
	"--no-proxy-server",
}

// Need returns the chromium binary, or skips the test loudly when it is
// missing (fails it when CI=true: CI must run it).
func Need(t testing.TB) string {
	t.Helper()
	if _, err := os.Stat(Path); err != nil {
		msg := "SKIPPED: headless Chromium is missing (" + err.Error() + "); install it with scripts/install-deps.sh or `apt-get install -y chromium`"
		if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
			t.Fatal(msg + " (CI=true: this test must run)")
		}
		// Loud even without -v: go test prints skip messages only with -v.
		fmt.Fprintf(os.Stderr, "--- %s: %s\n", t.Name(), msg)
		t.Skip(msg)
	}
	return Path
}

// Run runs headless Chromium bin on url with Flags and the extra flags
// (e.g. "--dump-dom", or "--screenshot=…" and "--window-size=…") and
// returns its stdout. It gets its own profile and home in a t.TempDir, and
// its whole process group is killed when it is done or after RunTimeout.
// A failed run fails the test with the end of Chromium's stderr.
func Run(t testing.TB, bin, url string, flags ...string) []byte {
	t.Helper()
	home := t.TempDir()
	args := append(append([]string{}, Flags...), "--user-data-dir="+filepath.Join(home, "profile"))
	args = append(append(args, flags...), url)
	ctx, cancel := context.WithTimeout(context.Background(), RunTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home, "XDG_CACHE_HOME="+home)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if cmd.Process != nil {
		// Helpers Chromium left behind belong to its process group.
		if kerr := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); kerr != nil && !errors.Is(kerr, syscall.ESRCH) {
			t.Logf("kill chromium's process group: %v", kerr)
		}
	}
	if err != nil {
		t.Fatalf("chromium %s: %v\nstderr (last 2000 bytes):\n%s", strings.Join(flags, " "), err, tail(stderr.Bytes(), 2000))
	}
	return stdout.Bytes()
}

// Screenshot loads url in a window of width×height and returns the PNG
// Chromium wrote to a file in a t.TempDir (and that file's path).
func Screenshot(t testing.TB, bin, url string, width, height int) (png []byte, path string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "screenshot.png")
	Run(t, bin, url, "--screenshot="+path, fmt.Sprintf("--window-size=%d,%d", width, height))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("screenshot of %s: %v", url, err)
	}
	return data, path
}

// Keep copies a screenshot to $SNOWFLAKED_SCREENSHOT_DIR/name when that
// variable is set, and returns where it went ("" when it is not set). A
// failed copy fails the test.
func Keep(t testing.TB, data []byte, name string) string {
	t.Helper()
	dir := os.Getenv(ScreenshotDirEnv)
	if dir == "" {
		return ""
	}
	keep := filepath.Join(dir, name)
	if err := os.WriteFile(keep, data, 0o644); err != nil {
		t.Errorf("copy the screenshot to %s: %v", keep, err)
		return ""
	}
	t.Logf("screenshot copied to %s", keep)
	return keep
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
