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
	// renderTimeout bounds the time until Helm's post-renderer runs (0: no bound); zero
	// for actions that render nothing (rollback).
	renderTimeout time.Duration
}

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
	f := o.fence
	done := make(chan result, 1)
	f.started()
	go func() {
		defer f.returned()
		rel, err := guarded(action)
		done <- result{rel, err}
	}()
	var bound <-chan time.Time
	if o.renderTimeout > 0 {
		t := time.NewTimer(o.renderTimeout)
		defer t.Stop()
		bound = t.C
	}
	for {
		select {
		case r := <-done:
			return r.rel, r.err
		case <-ctx.Done():
			select {
			case r := <-done: // finished in the same instant: its answer stands
				return r.rel, r.err
			default:
			}
			f.End() // for a caller that did not: nothing may land after ctx ended
			return nil, ctx.Err()
		case <-bound:
			if f.isRendered() {
				bound = nil
				continue
			}
			f.End()
			return nil, fmt.Errorf("%w: rendering took longer than %s", ErrRenderTimeout, o.renderTimeout)
		}
	}
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

func (f *Fence) isRendered() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rendered
}
