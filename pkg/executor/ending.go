package executor

import (
	"context"
	"sync"
	"time"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/wallclock"
)

// endKind is why an action ended for the executor before Helm returned.
type endKind int

const (
	notEnded endKind = iota
	endTimeout
	endCancel
	endLost
	endShutdown
)

// ending is how an action ends for the executor; the first end wins. It closes the
// action's fence before it cancels the action's context, so that nothing Helm writes after
// the end lands (its own failure write included): the executor's final write says why.
type ending struct {
	fence  *helmexec.Fence
	cancel context.CancelFunc
	mu     sync.Mutex
	kind   endKind
	detail string
}

func (e *ending) end(kind endKind, detail string) {
	e.mu.Lock()
	if e.kind != notEnded {
		e.mu.Unlock()
		return
	}
	e.kind, e.detail = kind, detail
	e.mu.Unlock()
	e.fence.End()
	e.cancel()
}

func (e *ending) get() (endKind, string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.kind, e.detail
}

func (e *ending) lost() bool { k, _ := e.get(); return k == endLost }

// timeout is the action's deadline: the request's, capped by MaxActionTime.
func (s *Service) timeout(a events.Action) time.Duration {
	timeout := a.Options.Timeout
	if s.MaxActionTime > 0 && (timeout <= 0 || timeout > s.MaxActionTime) {
		timeout = s.MaxActionTime
	}
	return timeout
}

// afterFunc calls f after d on the service's clock, on a goroutine of its own as
// time.AfterFunc does (a fake clock calls it under its lock); the answer stops it.
func (s *Service) afterFunc(d time.Duration, f func()) func() {
	t := wallclock.Or(s.Clock).AfterFunc(d, func() { go f() })
	return func() { t.Stop() }
}

// actionClock starts an action's deadline once, when Helm starts, and stops it at the end.
type actionClock struct {
	start func() (stop func())

	mu      sync.Mutex
	stopper func()
	stopped bool
}

// begin starts the deadline (once; never after stop).
func (c *actionClock) begin() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopper == nil && !c.stopped {
		c.stopper = c.start()
	}
}

// stop stops the deadline, if it started.
func (c *actionClock) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	if c.stopper != nil {
		c.stopper()
	}
}
