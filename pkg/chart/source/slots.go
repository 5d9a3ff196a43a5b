package source

import (
	"context"

	"github.com/async-helm/async-helm/pkg/auth"
	"github.com/async-helm/async-helm/pkg/chart/fairslots"
)

// FetchSlots bound index fetches, shared between tenants (package fairslots): a caller
// with many namespaces and slow servers gets no more than its share while others wait. A
// fetch may hold its slot for its whole timeout (30 s against a slow server), so no tenant
// takes the last free slot: whoever comes next finds one at once, and a freed slot goes to
// whichever waiting caller and namespace hold the fewest.
type FetchSlots = fairslots.Slots

// RefreshTenant is who fetches the administrators' repositories (cluster and
// CHART_REPOSITORIES), in the background refresh or on a miss.
var RefreshTenant = fairslots.Tenant{Caller: "system:async-helm:refresh"}

// NewFetchSlots is total fetches at once, shared as FetchSlots says.
func NewFetchSlots(total int) *FetchSlots {
	return fairslots.New(total, func(fairslots.Tenant) int { return total - 1 })
}

// TenantOf is whose share work for namespace takes (an index fetch, a render): the caller in
// ctx (CallerFrom; none: the empty caller), the ServiceAccounts of one namespace being one
// caller (auth.Share), and the namespace.
func TenantOf(ctx context.Context, namespace string) fairslots.Tenant {
	c, _ := CallerFrom(ctx)
	return fairslots.Tenant{Caller: auth.ShareName(c.User), Namespace: namespace}
}
