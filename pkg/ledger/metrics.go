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

// CallerQueue is one caller's queue over every namespace: how many of its accepted requests
// wait, and since when the oldest. Caller is the ledger's key of the caller (CallerKey),
// the only name of it the ledger keeps.
type CallerQueue struct {
	Caller string
	Count  int
	Oldest time.Time
}

// CallerQueues is every caller's queue, sorted by caller: a caller with many namespaces is
// one tenant (docs/design.md, "Tenants and shares"). Entries without a caller (no
// authentication) are not counted.
func (b *Book) CallerQueues() []CallerQueue {
	by := map[string]*CallerQueue{}
	b.mu.Lock()
	for _, it := range b.entries {
		c := it.e.Caller
		if !it.counted || c == "" {
			continue
		}
		q := by[c]
		if q == nil {
			q = &CallerQueue{Caller: c, Oldest: it.e.At}
			by[c] = q
		}
		q.Count++
		if it.e.At.Before(q.Oldest) {
			q.Oldest = it.e.At
		}
	}
	b.mu.Unlock()
	out := make([]CallerQueue, 0, len(by))
	for _, q := range by {
		out = append(out, *q)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Caller < out[j].Caller })
	return out
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
	for _, q := range m.Book.Queues() {
		ch <- prometheus.MustNewConstMetric(m.queued, prometheus.GaugeValue, float64(q.Count), q.Namespace)
		ch <- prometheus.MustNewConstMetric(m.oldest, prometheus.GaugeValue, max(now.Sub(q.Oldest).Seconds(), 0), q.Namespace)
	}
	for _, q := range m.Book.CallerQueues() {
		ch <- prometheus.MustNewConstMetric(m.callerQueued, prometheus.GaugeValue, float64(q.Count), q.Caller)
		ch <- prometheus.MustNewConstMetric(m.callerOldest, prometheus.GaugeValue, max(now.Sub(q.Oldest).Seconds(), 0), q.Caller)
	}
}
