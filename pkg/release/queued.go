package release

import (
	"sort"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/async-helm/async-helm/pkg/wallclock"
)

// queuedCounts keeps the number of queued reservations per namespace, and their order of
// acceptance, up to date from the informers' events: the admission bound costs submit O(1)
// per request and a queue position O(log n). Counting through the index (ByIndex, or
// IndexKeys, which also sorts) walked every queued reservation and was 15-29% of submit's
// CPU at thousands queued (make bench's profile).
type queuedCounts struct {
	rule  queuedRule
	clock clock.PassiveClock // dates a mark in the future when seen (nil: the wall clock)
	share int                // the most one namespace adds to the admission total (0: no bound)
	mu    sync.Mutex
	of    map[string]queueEntry // key -> entry, for the queued ones
	perNS map[string]int
	order queueOrder
	// shared is the admission total: the sum over namespaces of min(perNS, share).
	shared int
}

func newQueuedCounts(rule queuedRule, share int) *queuedCounts {
	return &queuedCounts{rule: rule, share: share, of: map[string]queueEntry{}, perNS: map[string]int{}}
}

// counts reports whether a namespace holding n queued adds its next one to shared.
func (q *queuedCounts) counts(n int) bool { return q.share <= 0 || n < q.share }

func (q *queuedCounts) set(obj any, deleted bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = d.Obj, true
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	key := m.GetNamespace() + "/" + m.GetName()
	queued := !deleted && q.rule.queued(obj)
	var at time.Time
	if queued {
		r, _ := RevisionFromMeta(m) // relabelled past parsing: r.Created is zero, the creation counts
		at = acceptedAt(m, r, wallclock.Or(q.clock).Now())
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	e, was := q.of[key]
	switch {
	case queued && !was:
		// The entry keeps the time it had when it joined: a later relabel does not move it.
		e = queueEntry{at: at.Unix(), namespace: m.GetNamespace(), key: key}
		q.of[key] = e
		if q.counts(q.perNS[e.namespace]) {
			q.shared++
		}
		q.perNS[e.namespace]++
		q.order.insert(e)
	case !queued && was:
		delete(q.of, key)
		q.order.remove(e)
		if q.perNS[e.namespace]--; q.counts(q.perNS[e.namespace]) {
			q.shared--
		}
		if q.perNS[e.namespace] <= 0 {
			delete(q.perNS, e.namespace)
		}
	}
}

// count is what admission reads: the namespace's queued revisions and the total, where no
// namespace adds more than its share (a tenant holding queued records of its own cannot
// fill the cluster's bound for every other namespace).
func (q *queuedCounts) count(namespace string) (inNamespace, total int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.perNS[namespace], q.shared
}

func (q *queuedCounts) position(key string) (QueuePosition, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	e, ok := q.of[key]
	if !ok {
		return QueuePosition{}, false
	}
	return QueuePosition{Position: q.order.position(e), Total: len(q.of), AcceptedAt: time.Unix(e.at, 0)}, true
}

func (q *queuedCounts) byNamespace() []NamespaceQueue {
	q.mu.Lock()
	out := make([]NamespaceQueue, 0, len(q.perNS))
	at := make(map[string]int, len(q.perNS))
	for _, e := range q.order.sorted { // oldest first: the first of a namespace is its oldest
		if _, seen := at[e.namespace]; !seen {
			at[e.namespace] = len(out)
			out = append(out, NamespaceQueue{Namespace: e.namespace, Count: q.perNS[e.namespace], Oldest: time.Unix(e.at, 0)})
			if len(out) == len(q.perNS) {
				break
			}
		}
	}
	q.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace < out[j].Namespace })
	return out
}

func (q *queuedCounts) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { q.set(obj, false) },
		UpdateFunc: func(_, obj any) { q.set(obj, false) },
		DeleteFunc: func(obj any) { q.set(obj, true) },
	}
}

// QueuedCount is the number of queued reservations in namespace and in all, no namespace
// adding more than IndexOptions.NamespaceShare to the total (Store.Queued).
func (x *RevisionIndex) QueuedCount(namespace string) (inNamespace, total int) {
	return x.queued.count(namespace)
}
