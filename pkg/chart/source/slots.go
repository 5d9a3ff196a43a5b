package source

import (
	"context"
	"fmt"

	"github.com/async-helm/async-helm/pkg/auth"
	"github.com/async-helm/async-helm/pkg/fairqueue"
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
