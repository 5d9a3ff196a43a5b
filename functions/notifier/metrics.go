package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/async-helm/async-helm/pkg/function"
	"github.com/async-helm/async-helm/pkg/sweeper"
)

// passMetrics expose what the sweeper's passes cost on /metrics (make bench reads them).
type passMetrics struct {
	passes, redriven, failed    prometheus.Counter
	seconds, calls, pending, ld prometheus.Gauge
}

func newPassMetrics(m *function.Metrics) *passMetrics {
	if m == nil {
		return nil
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "asynchelm", Subsystem: "notifier", Name: name, Help: help})
	}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "asynchelm", Subsystem: "notifier", Name: name, Help: help})
	}
	p := &passMetrics{
		passes:   counter("sweep_passes_total", "Sweeper passes run by this pod (only the leader sweeps)."),
		redriven: counter("sweep_redriven_total", "Stored requests the sweeper sent again."),
		failed:   counter("sweep_failed_total", "Pending revisions the sweeper failed."),
		seconds:  gauge("sweep_pass_seconds", "Duration of the last sweeper pass."),
		calls:    gauge("sweep_pass_api_calls", "Kubernetes API calls of the last sweeper pass."),
		pending:  gauge("sweep_pass_pending", "Pending revisions of async-helm the last sweeper pass looked at."),
		ld:       gauge("leader", "1 while this pod leads (runs the sweeper), else 0."),
	}
	m.Registry.MustRegister(p.passes, p.redriven, p.failed, p.seconds, p.calls, p.pending, p.ld)
	return p
}

func (p *passMetrics) observe(st sweeper.PassStats) {
	if p == nil {
		return
	}
	p.passes.Inc()
	p.redriven.Add(float64(st.Redriven))
	p.failed.Add(float64(st.Failed))
	p.seconds.Set(st.Duration.Seconds())
	p.calls.Set(float64(st.APICalls))
	p.pending.Set(float64(st.Pending))
}

func (p *passMetrics) leading(on bool) {
	if p == nil {
		return
	}
	if on {
		p.ld.Set(1)
	} else {
		p.ld.Set(0)
	}
}
