package helmexec

import (
	"context"
	"errors"
	"fmt"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/release/storage"
)

// ErrRenderTimeout is an action whose templates did not render within Request.RenderTimeout
// (its render worker's CPU) or three times that of wall time.
var ErrRenderTimeout = errors.New("rendering took too long")

type result struct {
	rel *helmrelease.Release
	err error
}

// runBounded runs Helm's action in a goroutine of its own and returns when it returns or
// when ctx ends; then Helm's goroutine may go on behind the closed fence, counted as an
// orphan until it returns. The action gets a context that does not end, so that all of
// Helm's work stays in this goroutine (its install and upgrade would hand it to one of
// their own that nobody sees end), and the fence is what stops it.
func runBounded(ctx context.Context, f *Fence, action func() (*helmrelease.Release, error)) (*helmrelease.Release, error) {
	done := make(chan result, 1)
	f.started()
	go func() {
		defer f.returned()
		rel, err := guarded(action)
		done <- result{rel, err}
	}()
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

// measuredRecords refuses a record over a render's bounds before Helm parses it
// (storage.Measured): Helm's upgrade, rollback and uninstall parse the manifests of the
// records they act on, and a record is the tenant's to write.
func measuredRecords() Option { return WithStorageWrapper(storage.Measured) }
