package ledger

import (
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// NamespaceQueue is one namespace's queue: how many accepted requests wait, and since when
// the oldest.
type NamespaceQueue struct {
	Namespace string
	Count     int
	Oldest    time.Time
}

// Queues is every namespace's queue, sorted by namespace: from the book, so nothing a tenant
// writes in its namespace moves it.
func (b *Book) Queues() []NamespaceQueue {
	b.mu.Lock()
	out := make([]NamespaceQueue, 0, len(b.ns))
	for ns, t := range b.ns {
		if len(t.order.sorted) > 0 {
			out = append(out, NamespaceQueue{Namespace: ns, Count: len(t.order.sorted), Oldest: t.order.sorted[0].at})
		}
	}
	b.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace < out[j].Namespace })
	return out
}

// QueueMetrics exposes each namespace's queue (docs/design.md, "Queue visibility"): a
// collector, so a namespace whose queue emptied leaves no series behind.
type QueueMetrics struct {
	Book           *Book
	queued, oldest *prometheus.Desc
}

// NewQueueMetrics describes the metrics of b.
func NewQueueMetrics(b *Book) *QueueMetrics {
	return &QueueMetrics{Book: b,
		queued: prometheus.NewDesc("asynchelm_queue_revisions", "Requests accepted and not started by an executor, per namespace.",
			[]string{"namespace"}, nil),
		oldest: prometheus.NewDesc("asynchelm_queue_oldest_age_seconds", "How long the oldest queued request of the namespace has waited.",
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
	now := m.Book.now()
	for _, q := range m.Book.Queues() {
		ch <- prometheus.MustNewConstMetric(m.queued, prometheus.GaugeValue, float64(q.Count), q.Namespace)
		ch <- prometheus.MustNewConstMetric(m.oldest, prometheus.GaugeValue, max(now.Sub(q.Oldest).Seconds(), 0), q.Namespace)
	}
}
