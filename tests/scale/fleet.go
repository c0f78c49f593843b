//go:build linux

package scale

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Bounds on waiting for processes.
const (
	stopGrace   = 20 * time.Second // SIGTERM to exit (the node's --shutdown-timeout is 10s), then SIGKILL
	killGrace   = 10 * time.Second // SIGKILL to exit
	pollEvery   = 200 * time.Millisecond
	logTailSize = 2000 // bytes of a node's log quoted in an error
)

// node is one snowflaked process.
type node struct {
	key     string
	addr    string // 127.0.0.1:port, also its advertised address
	logPath string
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{} // closed once the process has exited and been reaped
	err     error         // Wait's result; read only after done is closed
}

// pid returns the process ID.
func (n *node) pid() int { return n.cmd.Process.Pid }

// exited reports whether the process has exited.
func (n *node) exited() bool {
	select {
	case <-n.done:
		return true
	default:
		return false
	}
}

// exitErr says how the process ended, with the tail of its log.
func (n *node) exitErr() error {
	return fmt.Errorf("node %s (%s, pid %d) exited: %v; its log %s ends:\n%s",
		n.key, n.addr, n.pid(), n.err, n.logPath, logTail(n.logPath, logTailSize))
}

// stop sends SIGTERM and waits for the exit, then SIGKILL.
func (n *node) stop() error {
	if n.exited() {
		return nil
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
		return nil
	case <-time.After(stopGrace):
	}
	return errors.Join(fmt.Errorf("node %s (pid %d) still running %v after SIGTERM: killed", n.key, n.pid(), stopGrace), n.kill())
}

// kill sends SIGKILL and waits for the exit.
func (n *node) kill() error {
	if n.exited() {
		return nil
	}
	_ = n.cmd.Process.Kill()
	select {
	case <-n.done:
		return nil
	case <-time.After(killGrace):
		return fmt.Errorf("node %s (pid %d) still running %v after SIGKILL", n.key, n.pid(), killGrace)
	}
}

// startNode starts bin with args, its output appended to logPath. The
// process gets its own process group (a Ctrl-C at the terminal reaches the
// driver only, which stops it) and the kernel SIGKILLs it should the driver
// die without stopping it.
func startNode(bin, key, addr, logPath string, args []string) (*node, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child has its own copy
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	cmd.Dir = filepath.Dir(logPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	runtime.LockOSThread() // the parent-death signal fires when the forking thread exits: keep it a live one
	err = cmd.Start()
	runtime.UnlockOSThread()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	n := &node{key: key, addr: addr, logPath: logPath, cmd: cmd, started: time.Now(), done: make(chan struct{})}
	go func() { n.err = cmd.Wait(); close(n.done) }()
	return n, nil
}

// stopAll stops the nodes concurrently (SIGTERM, then SIGKILL).
func stopAll(nodes []*node) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { errs[i] = n.stop() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// waitReady polls /readyz of every node until all answer 200 or deadline
// passes; it fails at once when a node exits. It returns, per node, how long
// after its start it was first seen in service.
func waitReady(ctx context.Context, nodes []*node, deadline time.Time) ([]time.Duration, error) {
	took := make([]time.Duration, len(nodes))
	pending := make([]int, len(nodes))
	for i := range nodes {
		pending[i] = i
	}
	for range int(time.Until(deadline)/pollEvery) + 2 { // bounded in count as in time
		next := pending[:0]
		for _, i := range pending {
			n := nodes[i]
			if n.exited() {
				return took, n.exitErr()
			}
			if ready(ctx, n.addr) {
				took[i] = time.Since(n.started)
			} else {
				next = append(next, i)
			}
		}
		pending = next
		if len(pending) == 0 {
			return took, nil
		}
		if !time.Now().Before(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(pollEvery)
	}
	var keys []string
	for _, i := range pending {
		keys = append(keys, nodes[i].key)
	}
	return took, fmt.Errorf("%d of %d nodes not in service by the deadline: %s (first one's log %s ends:\n%s)",
		len(pending), len(nodes), truncate(strings.Join(keys, " "), 400), nodes[pending[0]].logPath,
		logTail(nodes[pending[0]].logPath, logTailSize))
}

// logTail returns the last n bytes of a file (or why it cannot).
func logTail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err.Error()
	}
	off := max(0, st.Size()-n)
	b := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(b, off); err != nil {
		return err.Error()
	}
	return string(b)
}
