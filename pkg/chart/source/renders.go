package source

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/async-helm/async-helm/pkg/fairqueue"
)

// ErrRendersBusy is a render that found no slot of its tenant's share in time (429).
var ErrRendersBusy = errors.New("too many renders at once")

// RenderSlots are the template route's renders at once (TEMPLATE_RENDER_MAX_PARALLEL),
// shared between tenants (pkg/fairqueue), each waited for at most the render timeout
// (within which one frees).
type RenderSlots struct {
	slots *fairqueue.Queue
	wait  time.Duration
}

// NewRenderSlots is total renders at once, each waited for at most wait.
func NewRenderSlots(total int, wait time.Duration) *RenderSlots {
	return &RenderSlots{slots: fairqueue.New(total, fairqueue.Options{}), wait: wait}
}

// RenderSlots are the settings' render slots (defaults: 2 slots, waited for 10 s).
func (c RouteSettings) RenderSlots() *RenderSlots {
	return NewRenderSlots(positiveOr(c.TemplateRenderMaxParallel, 2), positiveOr(c.TemplateRenderTimeout, 10*time.Second))
}

// Stats are what each tenant holds and waits for (submit's metrics).
func (r *RenderSlots) Stats() []fairqueue.FlowStats { return r.slots.Stats() }

// Take waits for a slot of t's share until ctx ends or the wait bound passes.
func (r *RenderSlots) Take(ctx context.Context, t Tenant) (release func(), err error) {
	wait, cancel := context.WithTimeout(ctx, r.wait)
	defer cancel()
	seat, err := r.slots.Acquire(wait, t)
	switch {
	case err == nil:
		return seat.Release, nil
	case ctx.Err() == nil:
		return nil, fmt.Errorf("%w: %d renders run, none freed for caller %q within %s", ErrRendersBusy, r.slots.Slots(), t.Caller, r.wait)
	}
	return nil, fmt.Errorf("wait for one of %d render slots: %w", r.slots.Slots(), err)
}
