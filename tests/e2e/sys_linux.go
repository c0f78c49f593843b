//go:build linux

package e2e

import "syscall"

// sysProcAttr makes the kernel kill a node if the test binary dies before
// its cleanups run.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
