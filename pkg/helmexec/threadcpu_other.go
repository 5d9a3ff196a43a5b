//go:build !linux

package helmexec

import "time"

// wallOnly is the thread meter where a thread's CPU time cannot be read: the render bound
// is then wall time.
type wallOnly struct{}

func lockThread() threadMeter { return wallOnly{} }

func (wallOnly) CPU() (time.Duration, bool) { return 0, false }

func (wallOnly) release() {}
