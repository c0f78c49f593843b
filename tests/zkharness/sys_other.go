//go:build unix && !linux

package zkharness

import "syscall"

// sysProcAttr puts the JVM in its own process group, so that Stop and Kill
// signal everything it runs.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
