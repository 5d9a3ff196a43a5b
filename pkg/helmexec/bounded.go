package helmexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
)

// ErrRenderTimeout is an action whose templates did not render within Request.RenderTimeout.
var ErrRenderTimeout = errors.New("rendering took too long")

// renderSignal is a post-renderer that changes nothing: Helm calls it right after the
// templates rendered, which is the only moment a caller can see that rendering ended.
type renderSignal struct{ f *Fence }

func (r renderSignal) Run(b *bytes.Buffer) (*bytes.Buffer, error) {
	r.f.markRendered()
	return b, nil
}

// runOptions say how one Helm action is bounded.
type runOptions struct {
	fence *Fence
	// renderTimeout bounds the CPU time Helm's goroutine spends until Helm's post-renderer
	// runs (0: no bound); zero for actions that render nothing (rollback).
	renderTimeout time.Duration
	// lock and after are the thread meter and the timers (tests replace them).
	lock  func() threadMeter
	after func(time.Duration) <-chan time.Time
}

// threadMeter is the CPU time of the goroutine running Helm, locked to its OS thread.
type threadMeter interface {
	// CPU is the CPU time used so far; false when it cannot be read (then the bound is
	// wall time).
	CPU() (time.Duration, bool)
	// release unlocks the thread; the goroutine calls it before it returns.
	release()
}

// unmetered is the meter of a goroutine whose CPU time is not read: the render bound is
// then wall time.
type unmetered struct{}

func (unmetered) CPU() (time.Duration, bool) { return 0, false }

func (unmetered) release() {}

type result struct {
	rel *helmrelease.Release
	err error
}

// runBounded runs Helm's action in a goroutine of its own and returns when it returns, when
// ctx ends, or when the render bound passes first. In the last two cases Helm's goroutine
// may go on: the fence is closed (the caller closes it before cancelling ctx; the render
// bound closes it here) and the goroutine is counted as an orphan until it returns. The
// action is given a context that does not end: Helm's install and upgrade would otherwise
// leave their work to a goroutine of their own that nobody can see end; this way all of
// Helm's work is in this goroutine, and the fence is what stops it.
func runBounded(ctx context.Context, o runOptions, action func() (*helmrelease.Release, error)) (*helmrelease.Release, error) {
	o = o.withDefaults()
	f := o.fence
	done := make(chan result, 1)
	meters := make(chan threadMeter, 1)
	f.started()
	go func() {
		defer f.returned()
		m := o.lock()
		defer m.release()
		meters <- m
		rel, err := guarded(action)
		done <- result{rel, err}
	}()
	bound := newRenderBound(o, f.renderCPU(), meters)
	for {
		select {
		case r := <-done:
			bound.spent(f)
			return r.rel, r.err
		case <-ctx.Done():
			select {
			case r := <-done: // finished in the same instant: its answer stands
				return r.rel, r.err
			default:
			}
			f.End() // for a caller that did not: nothing may land after ctx ended
			return nil, ctx.Err()
		case <-bound.c:
			select {
			case r := <-done: // its thread may already run other work: its answer stands
				bound.spent(f)
				return r.rel, r.err
			default:
			}
			if f.isRendered() {
				bound.c = nil
				continue
			}
			if !bound.passed() {
				continue
			}
			f.End()
			return nil, fmt.Errorf("%w: rendering took more than %s of CPU", ErrRenderTimeout, o.renderTimeout)
		}
	}
}

func (o runOptions) withDefaults() runOptions {
	switch {
	case o.lock != nil:
	case o.renderTimeout > 0:
		o.lock = lockThread
	default: // nothing to measure: the goroutine need not hold its thread
		o.lock = func() threadMeter { return unmetered{} }
	}
	if o.after == nil {
		o.after = time.After
	}
	return o
}

// renderBound is the render bound of one action, counted in the CPU time of Helm's own
// goroutine: waiting on the API server, or for a core while other tenants' work runs, does
// not use it up. The wall clock only says when to look: CPU time never runs ahead of it.
type renderBound struct {
	limit  time.Duration
	after  func(time.Duration) <-chan time.Time
	meters <-chan threadMeter
	meter  threadMeter
	c      <-chan time.Time // nil: no bound (or no longer)
}

// minRenderCheck keeps the last checks before the bound from waking for a few ns each.
const minRenderCheck = 10 * time.Millisecond

// newRenderBound is the bound of one run, given the render CPU the action's earlier runs
// used: one action has one bound, across the guard render and Helm's.
func newRenderBound(o runOptions, used time.Duration, meters <-chan threadMeter) *renderBound {
	b := &renderBound{limit: max(o.renderTimeout-used, minRenderCheck), after: o.after, meters: meters}
	if o.renderTimeout > 0 {
		b.c = b.after(b.limit)
	} else {
		b.limit = 0
	}
	return b
}

// spent adds the CPU this run used to the action's render CPU.
func (b *renderBound) spent(f *Fence) {
	if b.limit == 0 || !b.metered() {
		return
	}
	if used, ok := b.meter.CPU(); ok {
		f.addRenderCPU(used)
	}
}

// metered takes the meter Helm's goroutine hands over once it runs (false: not yet).
func (b *renderBound) metered() bool {
	if b.meter == nil {
		select {
		case b.meter = <-b.meters:
		default:
		}
	}
	return b.meter != nil
}

// passed reports whether the render used up its bound; if not, it waits for the rest.
func (b *renderBound) passed() bool {
	if !b.metered() { // Helm's goroutine has not run yet: it used nothing
		b.c = b.after(b.limit)
		return false
	}
	used, ok := b.meter.CPU()
	if !ok || used >= b.limit {
		return true
	}
	b.c = b.after(max(b.limit-used, minRenderCheck))
	return false
}

// ErrHelmPanicked is a Helm action that panicked: guarded turned the panic into this error.
var ErrHelmPanicked = errors.New("helm panicked")

// guarded runs action and turns a panic in it into an error. Helm's code dereferences what
// a release record says (a tenant may write its own records): a panic on a goroutine of its
// own would take the whole executor down, every tenant's running action with it, and the
// sweeper's re-send of the same action would take it down again.
func guarded(action func() (*helmrelease.Release, error)) (rel *helmrelease.Release, err error) {
	defer func() {
		if r := recover(); r != nil {
			rel, err = nil, fmt.Errorf("%w: %v", ErrHelmPanicked, r)
		}
	}()
	return action()
}

// renderCPU is the CPU the action's bounded runs used before Helm rendered.
func (f *Fence) renderCPU() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rendering
}

func (f *Fence) addRenderCPU(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.rendered {
		f.rendering += d
	}
}

func (f *Fence) isRendered() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rendered
}
