package notifier

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/wallclock"
)

// QueueSource is the queue of each namespace (release.RevisionIndex.QueueByNamespace).
type QueueSource interface {
	QueueByNamespace() []release.NamespaceQueue
}

// QueueMetrics exposes, per namespace with queued revisions (accepted, sealed by submit, not
// started by an executor), how many wait and the age of the oldest (docs/design.md, "Queue
// visibility"). A collector: each scrape reads the index once (one walk of the queued
// revisions, stopping when every namespace is seen), and a namespace whose queue emptied
// has no series left behind.
type QueueMetrics struct {
	Source QueueSource
	// Clock is the clock of the ages (nil: the wall clock).
	Clock clock.PassiveClock

	queued, oldest *prometheus.Desc
}

// NewQueueMetrics describes the metrics of src.
func NewQueueMetrics(src QueueSource) *QueueMetrics {
	return &QueueMetrics{Source: src,
		queued: prometheus.NewDesc("asynchelm_queue_revisions", "Revisions accepted and not started by an executor, per namespace.",
			[]string{"namespace"}, nil),
		oldest: prometheus.NewDesc("asynchelm_queue_oldest_age_seconds", "How long the oldest queued revision of the namespace has waited.",
			[]string{"namespace"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (m *QueueMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.queued
	ch <- m.oldest
}

// Collect implements prometheus.Collector.
func (m *QueueMetrics) Collect(ch chan<- prometheus.Metric) {
	at := wallclock.Or(m.Clock).Now()
	for _, q := range m.Source.QueueByNamespace() {
		ch <- prometheus.MustNewConstMetric(m.queued, prometheus.GaugeValue, float64(q.Count), q.Namespace)
		ch <- prometheus.MustNewConstMetric(m.oldest, prometheus.GaugeValue, max(at.Sub(q.Oldest).Seconds(), 0), q.Namespace)
	}
}
