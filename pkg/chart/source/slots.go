package source

import (
	"context"

	"github.com/async-helm/async-helm/pkg/chart/fairslots"
)

// MaxIndexFetches bounds the index fetches (download and parse) under way in the whole
// service: one can hold a 10 MiB index.yaml and about 68 MiB once parsed, and submit's
// memory is every namespace's. The console's index (pkg/chart/repos: its refresh, requests
// and refetches) and the installs by index entry share it.
const MaxIndexFetches = 4

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

// TenantOf is whose share work for namespace takes (an index fetch, a render): the caller in ctx (CallerFrom;
// none: the empty caller) and the namespace.
func TenantOf(ctx context.Context, namespace string) fairslots.Tenant {
	c, _ := CallerFrom(ctx)
	return fairslots.Tenant{Caller: c.User, Namespace: namespace}
}
