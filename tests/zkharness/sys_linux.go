//go:build linux

package zkharness

import "syscall"

// sysProcAttr puts the JVM in its own process group, so that Stop and Kill
// signal everything it runs, and has the kernel SIGKILL it should the test
// binary die without running its cleanups (a panic, a test timeout).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
