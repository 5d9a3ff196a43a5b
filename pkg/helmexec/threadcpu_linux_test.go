//go:build linux

package helmexec

import (
	"testing"
	"time"
)

// spinCPU computes on m's thread until m counts d more CPU time.
func spinCPU(m threadMeter, d time.Duration) {
	start, _ := m.CPU()
	for now := start; now-start < d; now, _ = m.CPU() {
	}
}

// The meter reads the locked thread's CPU time from another goroutine: it grows while the
// thread computes, and work on another thread does not advance it.
func TestThreadMeterReadsTheLockedThread(t *testing.T) {
	meters, spin, spun, stop := make(chan threadMeter), make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		m := lockThread()
		defer m.release()
		meters <- m
		<-spin
		spinCPU(m, 20*time.Millisecond)
		close(spun)
		<-stop
	}()
	m := <-meters
	before, ok := m.CPU()
	if !ok {
		t.Fatal("the thread's CPU clock cannot be read")
	}
	mine := lockThread() // this goroutine computes on a thread of its own
	spinCPU(mine, 20*time.Millisecond)
	mine.release()
	idle, _ := m.CPU()
	close(spin)
	<-spun
	busy, _ := m.CPU()
	close(stop)
	if idle-before >= 10*time.Millisecond {
		t.Errorf("the meter counted %s of another thread's work", idle-before)
	}
	if busy-idle < 20*time.Millisecond {
		t.Errorf("the meter counted %s of its thread's 20ms of work", busy-idle)
	}
}

// Once released, the meter keeps the CPU time its goroutine used: the thread goes back to
// the pool and its later work is another goroutine's.
func TestThreadMeterStopsAtRelease(t *testing.T) {
	meters, spun := make(chan threadMeter, 1), make(chan struct{})
	go func() {
		m := lockThread()
		spinCPU(m, 5*time.Millisecond)
		m.release()
		meters <- m
		spinCPU(lockThread(), 20*time.Millisecond) // most likely on the same thread again
		close(spun)
	}()
	m := <-meters
	atRelease, _ := m.CPU()
	<-spun
	if later, _ := m.CPU(); later != atRelease {
		t.Errorf("the released meter moved from %s to %s", atRelease, later)
	}
}
