package helmexec

import (
	"os/exec"
	"syscall"
)

// childProcAttr makes the kernel kill a render child when submit dies: it never outlives
// the process that would have killed it at its deadline.
func childProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
