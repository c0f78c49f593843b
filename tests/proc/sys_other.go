//go:build !linux

package proc

import "syscall"

// sysProcAttr: outside Linux there is no parent-death signal; t.Cleanup
// still kills the child.
func sysProcAttr() *syscall.SysProcAttr { return nil }
