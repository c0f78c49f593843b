package zkdiscovery

import "syscall"

// sysProcAttr puts the JVM in a process group of its own and has the
// kernel SIGKILL it should the test binary die without its cleanups.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
