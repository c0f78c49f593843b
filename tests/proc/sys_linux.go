//go:build linux

package proc

import "syscall"

// sysProcAttr has the kernel SIGKILL a child should the test binary die
// before its cleanups run (a panic, a test timeout).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
