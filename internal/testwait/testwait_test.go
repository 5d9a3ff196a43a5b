package testwait

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	var calls atomic.Int32
	if !Until(time.Second, func() bool { return calls.Add(1) == 3 }) {
		t.Fatal("Until gave up on a condition that held on its third poll")
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("polled %d times, want 3", n)
	}
}

func TestUntilGivesUpAtItsTimeout(t *testing.T) {
	start := time.Now()
	if Until(50*time.Millisecond, func() bool { return false }) {
		t.Fatal("Until said a condition that never holds held")
	}
	if d := time.Since(start); d < 50*time.Millisecond || d > 5*time.Second {
		t.Errorf("gave up after %s, want about 50ms", d)
	}
}
