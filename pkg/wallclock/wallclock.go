// Package wallclock is the one default of the clocks (k8s.io/utils/clock) async-helm's types take:
// a nil Clock field asks Or and gets the wall clock, so a zero value stays usable; tests inject a
// FakeClock (internal/fakekube.Clock) and move it by hand.
package wallclock

import (
	"context"
	"time"

	"k8s.io/utils/clock"
)

// Or is c, or the wall clock when c is nil. C is the interface the type needs: a
// clock.PassiveClock to tell the time, a clock.WithTicker or clock.Clock to wait.
func Or[C clock.PassiveClock](c C) C {
	if any(c) == nil {
		return any(clock.RealClock{}).(C)
	}
	return c
}

// Every calls f at each tick of c (nil: the wall clock), every interval, until ctx ends.
func Every(ctx context.Context, c clock.WithTicker, interval time.Duration, f func()) {
	t := Or(c).NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			f()
		}
	}
}
