//go:build !linux

package proc

import "syscall"

// sysProcAttr puts the function in its own process group (a Ctrl-C in the terminal reaches
// the parent, which stops it in order).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
