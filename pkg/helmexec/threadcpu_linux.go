//go:build linux

package helmexec

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// osThread is the OS thread an action's goroutine is locked to while it runs: the render
// bound reads that thread's CPU time, which another goroutine's work or a busy node does
// not advance.
type osThread struct {
	tid  int
	base time.Duration // the thread's CPU time when it was locked (threads are reused)
}

// lockThread locks the calling goroutine to its OS thread; it must call release before it
// returns.
func lockThread() threadMeter {
	runtime.LockOSThread()
	t := osThread{tid: unix.Gettid()}
	t.base, _ = t.total()
	return t
}

// CPU is the CPU time the thread used since it was locked (false where the kernel does
// not answer).
func (t osThread) CPU() (time.Duration, bool) {
	now, ok := t.total()
	return now - t.base, ok
}

func (t osThread) total() (time.Duration, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(threadClock(t.tid), &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}

func (osThread) release() { runtime.UnlockOSThread() }

// threadClock is Linux's CPU clock of thread tid, readable from any thread of the process:
// MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED) in the kernel's posix-timers.h.
func threadClock(tid int) int32 {
	const perThread, sched = 4, 2
	return ^int32(tid)<<3 | perThread | sched
}
