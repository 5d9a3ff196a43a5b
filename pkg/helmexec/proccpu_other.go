//go:build !linux

package helmexec

import "time"

// processCPU cannot be read here: a worker's bound is then wall time.
func processCPU(int) (time.Duration, bool) { return 0, false }
