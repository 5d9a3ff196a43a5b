package ledger

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// queued is one tenant's queue: how many accepted requests wait, and since when the oldest.
type queued struct {
	count  int
	oldest time.Time
}

// queues is every namespace's and every caller's queue, from the book, so nothing a tenant
// writes in its namespace moves it. A caller is named by its key (CallerKey); entries
// without one (no authentication) count for no caller.
func (b *Book) queues() (byNamespace, byCaller map[string]queued) {
	byNamespace, byCaller = map[string]queued{}, map[string]queued{}
	b.mu.Lock()
	defer b.mu.Unlock()
	for ns, t := range b.ns {
		if len(t.order.sorted) > 0 {
			byNamespace[ns] = queued{count: len(t.order.sorted), oldest: t.order.sorted[0].at}
		}
	}
	for _, it := range b.entries {
		if c := it.e.Caller; it.counted && c != "" {
			q, ok := byCaller[c]
			if !ok || it.e.At.Before(q.oldest) {
				q.oldest = it.e.At
			}
			q.count++
			byCaller[c] = q
		}
	}
	return byNamespace, byCaller
}

// QueueMetrics exposes each namespace's queue (docs/design.md, "Queue visibility"): a
// collector, so a namespace whose queue emptied leaves no series behind.
type QueueMetrics struct {
	Book                       *Book
	queued, oldest             *prometheus.Desc
	callerQueued, callerOldest *prometheus.Desc
}

// NewQueueMetrics describes the metrics of b.
func NewQueueMetrics(b *Book) *QueueMetrics {
	return &QueueMetrics{Book: b,
		queued: prometheus.NewDesc("asynchelm_queue_revisions", "Requests accepted and not started by an executor, per namespace.",
			[]string{"namespace"}, nil),
		oldest: prometheus.NewDesc("asynchelm_queue_oldest_age_seconds", "How long the oldest queued request of the namespace has waited.",
			[]string{"namespace"}, nil),
		callerQueued: prometheus.NewDesc("asynchelm_queue_caller_revisions",
			"Requests accepted and not started by an executor, per caller over all its namespaces (caller: the ledger's caller key).",
			[]string{"caller"}, nil),
		callerOldest: prometheus.NewDesc("asynchelm_queue_caller_oldest_age_seconds", "How long the oldest queued request of the caller has waited.",
			[]string{"caller"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (m *QueueMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.queued
	ch <- m.oldest
	ch <- m.callerQueued
	ch <- m.callerOldest
}

// Collect implements prometheus.Collector.
func (m *QueueMetrics) Collect(ch chan<- prometheus.Metric) {
	now := m.Book.now()
	byNamespace, byCaller := m.Book.queues()
	for _, s := range []struct {
		queues        map[string]queued
		count, oldest *prometheus.Desc
	}{{byNamespace, m.queued, m.oldest}, {byCaller, m.callerQueued, m.callerOldest}} {
		for key, q := range s.queues {
			ch <- prometheus.MustNewConstMetric(s.count, prometheus.GaugeValue, float64(q.count), key)
			ch <- prometheus.MustNewConstMetric(s.oldest, prometheus.GaugeValue, max(now.Sub(q.oldest).Seconds(), 0), key)
		}
	}
}
