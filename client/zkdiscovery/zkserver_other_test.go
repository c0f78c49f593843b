//go:build unix && !linux

package zkdiscovery

import "syscall"

// sysProcAttr puts the JVM in a process group of its own.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
