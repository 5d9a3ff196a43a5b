package wallclock

import (
	"context"
	"runtime"
	"testing"
	"time"

	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
)

func TestOrIsTheWallClockWhenNil(t *testing.T) {
	var passive clock.PassiveClock
	if _, ok := Or(passive).(clock.RealClock); !ok {
		t.Errorf("Or(nil PassiveClock) = %T, want clock.RealClock", Or(passive))
	}
	var ticking clock.Clock
	if _, ok := Or(ticking).(clock.RealClock); !ok {
		t.Errorf("Or(nil Clock) = %T, want clock.RealClock", Or(ticking))
	}
}

func TestOrKeepsAGivenClock(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var c clock.WithTicker = testingclock.NewFakeClock(t0)
	if got := Or(c).Now(); !got.Equal(t0) {
		t.Errorf("Or(fake).Now() = %v, want %v", got, t0)
	}
}

func TestEveryCallsAtEachTickUntilTheContextEnds(t *testing.T) {
	fc := testingclock.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	ctx, cancel := context.WithCancel(context.Background())
	calls, ended := make(chan struct{}), make(chan struct{})
	go func() {
		Every(ctx, fc, time.Minute, func() { calls <- struct{}{} })
		close(ended)
	}()
	for i := 0; i < 2; i++ {
		for !fc.HasWaiters() {
			runtime.Gosched()
		}
		fc.Step(time.Minute)
		<-calls
	}
	cancel()
	<-ended
	select {
	case <-calls:
		t.Fatal("f was called after ctx ended")
	default:
	}
}
