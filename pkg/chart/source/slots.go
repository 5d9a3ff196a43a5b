package source

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/clock"

	"github.com/async-helm/async-helm/pkg/auth"
	"github.com/async-helm/async-helm/pkg/fairqueue"
	"github.com/async-helm/async-helm/pkg/wallclock"
)

// Tenant is whose share work takes: its namespace and its caller (pkg/fairqueue's Flow).
type Tenant = fairqueue.Flow

// FetchSlots bound index and chart fetches, shared between tenants (pkg/fairqueue). A fetch
// may hold its slot for its whole timeout, so no tenant takes the last free one.
type FetchSlots struct{ q *fairqueue.Queue }

// RefreshTenant fetches the administrators' repositories (cluster and CHART_REPOSITORIES).
var RefreshTenant = Tenant{Caller: "system:async-helm:refresh"}

// NewFetchSlots is total fetches at once, shared as FetchSlots says.
func NewFetchSlots(total int) *FetchSlots {
	return &FetchSlots{q: fairqueue.New(total, fairqueue.Options{Limit: func(Tenant) int { return total - 1 }})}
}

// Stats are what each tenant holds and waits for (submit's metrics).
func (f *FetchSlots) Stats() []fairqueue.FlowStats { return f.q.Stats() }

// Acquire waits until ctx ends for a slot of t's share.
func (f *FetchSlots) Acquire(ctx context.Context, t Tenant) (release func(), err error) {
	seat, err := f.q.Acquire(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("wait for one of %d fetch slots: %w", f.q.Slots(), err)
	}
	return seat.Release, nil
}

// TryAcquire takes a slot only if one is free for t now.
func (f *FetchSlots) TryAcquire(t Tenant) (release func(), ok bool) {
	seat, ok := f.q.TryAcquire(t)
	if !ok {
		return nil, false
	}
	return seat.Release, true
}

// TenantOf is whose share work for namespace takes: the caller in ctx (CallerFrom), a
// namespace's ServiceAccounts being one caller (auth.ShareName), and the namespace.
func TenantOf(ctx context.Context, namespace string) Tenant {
	c, _ := CallerFrom(ctx)
	return Tenant{Caller: auth.ShareName(c.User), Namespace: namespace}
}

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

// CallerLimits is a token bucket per caller for the routes that fetch and render charts:
// any valid token may call them, so one caller must not keep submit busy for everyone.
type CallerLimits struct {
	Rate  float64 // tokens a second
	Burst int
	// MaxCallers bounds the callers remembered (default 10,000); when full, those whose
	// bucket is full again are forgotten.
	MaxCallers int
	Clock      clock.PassiveClock // nil: the wall clock

	mu       sync.Mutex
	byCaller map[string]*rate.Limiter
}

// Allow takes a token of caller's bucket; without one, it says when the next one comes.
func (l *CallerLimits) Allow(caller string) (bool, time.Duration) {
	now := wallclock.Or(l.Clock).Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	lim, ok := l.byCaller[caller]
	if !ok {
		l.forgetFull(now)
		lim = rate.NewLimiter(rate.Limit(l.Rate), max(l.Burst, 1))
		if l.byCaller == nil {
			l.byCaller = map[string]*rate.Limiter{}
		}
		l.byCaller[caller] = lim
	}
	if lim.AllowN(now, 1) {
		return true, 0
	}
	if l.Rate <= 0 {
		return false, time.Duration(math.MaxInt64)
	}
	missing := 1 - lim.TokensAt(now)
	return false, time.Duration(missing / l.Rate * float64(time.Second))
}

// forgetFull makes room for one more caller.
func (l *CallerLimits) forgetFull(now time.Time) {
	limit := positiveOr(l.MaxCallers, 10000)
	if len(l.byCaller) < limit {
		return
	}
	for c, lim := range l.byCaller {
		if lim.TokensAt(now) >= float64(lim.Burst()) {
			delete(l.byCaller, c)
		}
	}
	for c := range l.byCaller { // all busy: any one goes (map order)
		if len(l.byCaller) < limit {
			break
		}
		delete(l.byCaller, c)
	}
}

// ErrCredentialsRefused: a repository's credentials were not sent, the caller may not read
// their Secrets (or they changed while fetching).
var ErrCredentialsRefused = errors.New("chart repository credentials refused")

// Caller is who a fetch is for (events.Caller); an empty User is a trusted local run.
type Caller struct {
	User, UID string
	Groups    []string
	Extra     map[string][]string
}

type callerKey struct{}

// WithCaller carries the caller of a fetch to the credential checks and readers.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom is the caller WithCaller put into ctx; ok is false when there is none.
func CallerFrom(ctx context.Context) (c Caller, ok bool) {
	c, ok = ctx.Value(callerKey{}).(Caller)
	return c, ok
}
