//go:build !linux

package helmexec

import "os/exec"

// childProcAttr: only Linux can tie a child's life to its parent's.
func childProcAttr(*exec.Cmd) {}
