package source

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/async-helm/async-helm/pkg/chart/fairslots"
)

// ErrRendersBusy is a render that found no slot of its tenant's share in time (429 at the
// edge).
var ErrRendersBusy = errors.New("too many renders at once")

// RenderSlots are the template route's renders at once (TEMPLATE_RENDER_MAX_PARALLEL),
// shared between tenants (package fairslots). They are work-conserving: a caller alone
// renders in every slot; a caller whose slow templates fill them at its allowed rate keeps
// them only until another caller waits, who gets the next one that frees.
type RenderSlots struct {
	slots *fairslots.Slots
	// wait bounds the wait for a slot: a render holds its slot at most the render timeout,
	// so one frees within it.
	wait time.Duration
}

// NewRenderSlots is total renders at once, each waited for at most wait.
func NewRenderSlots(total int, wait time.Duration) *RenderSlots {
	return &RenderSlots{slots: fairslots.New(total, nil), wait: wait}
}

// RenderSlots are the settings' render slots (defaults: 2 slots, waited for 10 s).
func (c RouteSettings) RenderSlots() *RenderSlots {
	n, wait := c.TemplateRenderMaxParallel, c.TemplateRenderTimeout
	if n <= 0 {
		n = 2
	}
	if wait <= 0 {
		wait = 10 * time.Second
	}
	return NewRenderSlots(n, wait)
}

// Take waits for a slot of t's share until ctx ends or the wait bound passes
// (ErrRendersBusy).
func (r *RenderSlots) Take(ctx context.Context, t fairslots.Tenant) (release func(), err error) {
	wait, cancel := context.WithTimeout(ctx, r.wait)
	defer cancel()
	release, err = r.slots.Acquire(wait, t)
	if err != nil && ctx.Err() == nil {
		return nil, fmt.Errorf("%w: %d renders run, none freed for caller %q within %s", ErrRendersBusy, r.slots.Total(), t.Caller, r.wait)
	}
	return release, err
}
