package main

import (
	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/fairqueue"
)

// registerShares exports what each tenant has of submit's slot pools (docs/design.md,
// "Tenants and shares"): asynchelm_submit_slots_{queued,oldest_wait_seconds,held}{pool,
// namespace,caller} for the template route's render slots and the index fetch slots. The
// ledger's queues per namespace and per caller are ledger.QueueMetrics'.
func (f *Function) registerShares(renders *chartsource.RenderSlots, src *chartsource.Source) {
	if f.metrics == nil {
		return
	}
	f.metrics.Registry.MustRegister(fairqueue.NewMetrics("asynchelm_submit_slots",
		fairqueue.Pool{Name: "render", Stats: renders.Stats},
		fairqueue.Pool{Name: "index_fetch", Stats: src.Slots().Stats}))
}
