//go:build linux

package proc

import "syscall"

// sysProcAttr puts the function in its own process group (a Ctrl-C in the terminal reaches
// the parent, which stops it in order) and sends it SIGTERM when the parent dies: a test
// binary killed at its timeout left its functions running, and a notifier left so kept the
// election Lease every later notifier of the cluster waited for.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
