package ntpharness

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/beevik/ntp"

	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
)

const (
	// chronyReadyTimeout bounds the wait for chronyd's first valid answer.
	chronyReadyTimeout = 20 * time.Second
	// chronyStopTimeout bounds the wait for chronyd to exit after SIGTERM.
	chronyStopTimeout = 5 * time.Second
	// chronyStartAttempts bounds retries when chronyd exits early, e.g.
	// because another process took the free port first.
	chronyStartAttempts = 3
)

// errChronyExited reports that chronyd exited before it answered.
var errChronyExited = errors.New("chronyd exited before answering")

// Chrony is a real NTP server: Debian's chronyd on a loopback UDP port.
type Chrony struct {
	addr string
}

// Addr returns the server's "127.0.0.1:port", usable as a beevik/ntp address.
func (c *Chrony) Addr() string { return c.addr }

// StartChrony starts chronyd -x -d -f <conf> on a free 127.0.0.1 UDP port
// ("port N", "bindaddress 127.0.0.1", "allow 127.0.0.1", "local stratum 8",
// "cmdport 0", pidfile/driftfile in t.TempDir()), waits until it answers a
// beevik/ntp query (bounded), t.Cleanup kills it. fakeOffset != "" runs it
// under Debian's faketime: `faketime -f '<fakeOffset>' chronyd ...` (e.g.
// "-3s"). It skips or fails the test as RequireChrony and RequireFaketime do.
func StartChrony(t testing.TB, fakeOffset string) *Chrony {
	t.Helper()
	chronyd := RequireChrony(t)
	var argv []string
	if fakeOffset != "" {
		argv = append(argv, RequireFaketime(t), "-f", fakeOffset)
	}
	argv = append(argv, chronyd, "-x", "-d")
	if os.Geteuid() != 0 {
		argv = append(argv, "-U") // allow a non-root start; -x needs no privileges
	}
	var errs []error
	for attempt := 1; attempt <= chronyStartAttempts; attempt++ {
		c, err := startChrony(t, argv)
		if err == nil {
			return c
		}
		errs = append(errs, fmt.Errorf("attempt %d: %w", attempt, err))
		if !errors.Is(err, errChronyExited) {
			break // it ran but did not answer: a new port will not help
		}
	}
	t.Fatalf("ntpharness: start chronyd: %v", errors.Join(errs...))
	return nil
}

// startChrony makes one attempt: config on a fresh port, start, wait until
// ready. On success t.Cleanup stops the process; on error it is already gone.
func startChrony(t testing.TB, argv []string) (*Chrony, error) {
	t.Helper()
	dir := t.TempDir()
	port, err := freeUDPPort()
	if err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "chrony.conf")
	if err := os.WriteFile(conf, []byte(chronyConf(dir, port)), 0o644); err != nil {
		return nil, fmt.Errorf("write %s: %w", conf, err)
	}
	logPath := filepath.Join(dir, "chronyd.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create chronyd log: %w", err)
	}
	defer logFile.Close() // the child holds its own descriptor

	argv = append(slices.Clip(argv), "-f", conf) // never write into the caller's array
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Own process group: faketime forks, so signal chronyd along with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("exec %q: %w", argv, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	stop := func() {
		pgid := cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(chronyStopTimeout):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-exited
		}
		// Under faketime the process we waited for is faketime, and chronyd is
		// its child: wait until no live member of the group is left, so it
		// no longer writes into the temp dir the test is about to remove.
		deadline := time.Now().Add(chronyStopTimeout)
		for groupAlive(pgid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if groupAlive(pgid) {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			for i := 0; i < 50 && groupAlive(pgid); i++ {
				time.Sleep(20 * time.Millisecond)
			}
		}
	}

	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := waitNTPReady(addr, exited); err != nil {
		stop()
		return nil, fmt.Errorf("%q: %w\nchronyd log tail:\n%s", argv, err, logTail(logPath, 20))
	}
	t.Logf("ntpharness: chronyd ready on %s: %q", addr, argv)
	t.Cleanup(stop)
	return &Chrony{addr: addr}, nil
}

// chronyConf returns a chronyd configuration that serves local time at
// stratum 8 on 127.0.0.1:port only, keeps all files in dir and opens no
// command socket, so that it cannot collide with a system chronyd.
func chronyConf(dir string, port int) string {
	conf := fmt.Sprintf(`port %d
bindaddress 127.0.0.1
allow 127.0.0.1
local stratum 8
cmdport 0
bindcmdaddress /
pidfile %s
driftfile %s
`, port, filepath.Join(dir, "chronyd.pid"), filepath.Join(dir, "chrony.drift"))
	if os.Geteuid() == 0 {
		// Debian's chronyd drops root for _chrony by default, which then
		// cannot write to the 0700 root-owned t.TempDir().
		conf += "user root\n"
	}
	return conf
}

// waitNTPReady polls addr until it answers a query that passes Validate,
// the process exits, or chronyReadyTimeout passes.
func waitNTPReady(addr string, exited <-chan struct{}) error {
	deadline := time.Now().Add(chronyReadyTimeout)
	var lastErr error
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errChronyExited
		default:
		}
		resp, err := ntp.QueryWithOptions(addr, ntp.QueryOptions{Timeout: 500 * time.Millisecond})
		if err == nil {
			err = resp.Validate()
			if err != nil {
				err = fmt.Errorf("validate (stratum %d): %w", resp.Stratum, err)
			}
		}
		if err == nil {
			return nil
		}
		lastErr = err
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("no valid NTP answer within %v, last error: %w", chronyReadyTimeout, lastErr)
}

// freeUDPPort returns a 127.0.0.1 UDP port that was free a moment ago.
func freeUDPPort() (int, error) {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return 0, fmt.Errorf("find free UDP port: %w", err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port, nil
}

// logTail returns the last n lines of the file at path, or why it cannot.
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(read %s: %v)", path, err)
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// RequireChrony returns the path of chronyd. When it is missing it fails the
// test if the environment has CI=true, and otherwise skips it loudly.
func RequireChrony(t testing.TB) string {
	t.Helper()
	return testsupport.NeedTool(t, "chrony", "chronyd", "/usr/sbin/chronyd")
}

// RequireFaketime returns the path of faketime. When it is missing it fails
// the test if the environment has CI=true, and otherwise skips it loudly.
func RequireFaketime(t testing.TB) string {
	t.Helper()
	return testsupport.NeedTool(t, "faketime", "faketime", "/usr/bin/faketime")
}

// groupAlive reports whether a process of group pgid is still running
// (zombies, which hold no files, do not count).
func groupAlive(pgid int) bool {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// Fields after the ")" that ends the command name: state ppid pgrp ...
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(b[i+1:]))
		if len(fields) >= 3 && fields[2] == strconv.Itoa(pgid) && fields[0] != "Z" {
			return true
		}
	}
	return false
}
