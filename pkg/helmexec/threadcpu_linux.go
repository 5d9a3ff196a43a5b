//go:build linux

package helmexec

import (
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// osThread is the OS thread an action's goroutine is locked to while it runs: the render
// bound reads that thread's CPU time, which another goroutine's work or a busy node does
// not advance.
type osThread struct {
	tid  int
	base time.Duration // the thread's CPU time when it was locked (threads are reused)
	// final is the CPU time at release (-1 before): the thread then runs other work.
	final atomic.Int64
}

// lockThread locks the calling goroutine to its OS thread; it must call release before it
// returns.
func lockThread() threadMeter {
	runtime.LockOSThread()
	t := &osThread{tid: unix.Gettid()}
	t.base, _ = t.total()
	t.final.Store(-1)
	return t
}

// CPU is the CPU time the thread used since it was locked and until it was released
// (false where the kernel does not answer).
func (t *osThread) CPU() (time.Duration, bool) {
	if f := t.final.Load(); f >= 0 {
		return time.Duration(f), true
	}
	now, ok := t.total()
	return now - t.base, ok
}

func (t *osThread) total() (time.Duration, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(threadClock(t.tid), &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}

func (t *osThread) release() {
	used, _ := t.CPU()
	t.final.Store(int64(used))
	runtime.UnlockOSThread()
}

// threadClock is Linux's CPU clock of thread tid, readable from any thread of the process:
// MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED) in the kernel's posix-timers.h.
func threadClock(tid int) int32 {
	const perThread, sched = 4, 2
	return ^int32(tid)<<3 | perThread | sched
}
