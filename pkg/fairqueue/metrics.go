package fairqueue

import "github.com/prometheus/client_golang/prometheus"

// Pool names a pool whose flows Metrics exports; Stats is read at each scrape.
type Pool struct {
	Name  string
	Stats func() []FlowStats
}

// Metrics exports per pool and tenant the work waiting, the longest wait and the slots held, at
// each scrape. It names every tenant: serve it only to an authorized scraper (MetricsGuard).
type Metrics struct {
	pools                []Pool
	queued, oldest, held *prometheus.Desc
}

// NewMetrics describes <prefix>_queued, _oldest_wait_seconds and _held (pool, namespace, caller).
func NewMetrics(prefix string, pools ...Pool) *Metrics {
	labels := []string{"pool", "namespace", "caller"}
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prefix+"_"+name, help, labels, nil)
	}
	return &Metrics{pools: pools,
		queued: desc("queued", "Work waiting for a slot of the pool, per tenant."),
		oldest: desc("oldest_wait_seconds", "How long the tenant's longest waiting work has waited for a slot of the pool."),
		held:   desc("held", "Slots of the pool the tenant holds."),
	}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.queued
	ch <- m.oldest
	ch <- m.held
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, p := range m.pools {
		for _, f := range p.Stats() {
			ch <- prometheus.MustNewConstMetric(m.queued, prometheus.GaugeValue, float64(f.Queued), p.Name, f.Namespace, f.Caller)
			ch <- prometheus.MustNewConstMetric(m.oldest, prometheus.GaugeValue, f.OldestWait.Seconds(), p.Name, f.Namespace, f.Caller)
			ch <- prometheus.MustNewConstMetric(m.held, prometheus.GaugeValue, float64(f.Held), p.Name, f.Namespace, f.Caller)
		}
	}
}
