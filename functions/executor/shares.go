package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/async-helm/async-helm/pkg/executor"
	"github.com/async-helm/async-helm/pkg/fairqueue"
)

// newShares exports what each tenant has of the executor's action and CPU slots
// (asynchelm_executor_slots_*, docs/design.md "Tenants and shares").
func newShares(svc *executor.Service) prometheus.Collector {
	return fairqueue.NewMetrics("asynchelm_executor_slots",
		fairqueue.Pool{Name: "action", Stats: func() []fairqueue.FlowStats { a, _ := svc.Shares(); return a }},
		fairqueue.Pool{Name: "cpu", Stats: func() []fairqueue.FlowStats { _, c := svc.Shares(); return c }})
}
