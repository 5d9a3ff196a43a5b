package main

import (
	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/fairqueue"
)

// registerShares exports what each tenant has of submit's render and index fetch slots:
// asynchelm_submit_slots_{queued,oldest_wait_seconds,held}{pool,namespace,caller}.
func (f *Function) registerShares(renders *chartsource.RenderSlots, src *chartsource.Source) {
	if f.metrics == nil {
		return
	}
	f.metrics.Registry.MustRegister(fairqueue.NewMetrics("asynchelm_submit_slots",
		fairqueue.Pool{Name: "render", Stats: renders.Stats},
		fairqueue.Pool{Name: "index_fetch", Stats: src.Slots().Stats}))
}
