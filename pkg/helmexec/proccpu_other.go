//go:build !linux

package helmexec

import (
	"os/exec"
	"time"
)

// childProcAttr: only Linux can tie a child's life to its parent's.
func childProcAttr(*exec.Cmd) {}

// processCPU cannot be read here: a worker's bound is then wall time.
func processCPU(int) (time.Duration, bool) { return 0, false }
