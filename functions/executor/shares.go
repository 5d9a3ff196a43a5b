package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/async-helm/async-helm/pkg/executor"
	"github.com/async-helm/async-helm/pkg/fairqueue"
)

// shares exports what each tenant has of the executor's slots (docs/design.md, "Tenants and
// shares"), read from the fair queues at each scrape.
type shares struct {
	svc                  *executor.Service
	queued, oldest, held *prometheus.Desc
}

func newShares(svc *executor.Service) *shares {
	labels := []string{"pool", "namespace", "caller"}
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("asynchelm_executor_slots_"+name, help, labels, nil)
	}
	return &shares{svc: svc,
		queued: desc("queued", "Deliveries or actions waiting for a slot of the pool (action, cpu), per tenant."),
		oldest: desc("oldest_wait_seconds", "How long the tenant's longest waiting work has waited for a slot of the pool."),
		held:   desc("held", "Slots of the pool the tenant holds."),
	}
}

func (s *shares) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.queued
	ch <- s.oldest
	ch <- s.held
}

func (s *shares) Collect(ch chan<- prometheus.Metric) {
	actions, cpu := s.svc.Shares()
	s.collect(ch, "action", actions)
	s.collect(ch, "cpu", cpu)
}

func (s *shares) collect(ch chan<- prometheus.Metric, pool string, flows []fairqueue.FlowStats) {
	for _, f := range flows {
		ch <- prometheus.MustNewConstMetric(s.queued, prometheus.GaugeValue, float64(f.Queued), pool, f.Namespace, f.Caller)
		ch <- prometheus.MustNewConstMetric(s.oldest, prometheus.GaugeValue, f.OldestWait.Seconds(), pool, f.Namespace, f.Caller)
		ch <- prometheus.MustNewConstMetric(s.held, prometheus.GaugeValue, float64(f.Held), pool, f.Namespace, f.Caller)
	}
}
