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
// acceptance, up to date from the informers' events, for the notifier's queue metrics
// (QueueByNamespace). Admission and queue positions count the ledger (pkg/ledger).
type queuedCounts struct {
	rule  queuedRule
	clock clock.PassiveClock // dates a mark in the future when seen (nil: the wall clock)
	mu    sync.Mutex
	of    map[string]queueEntry // key -> entry, for the queued ones
	perNS map[string]int
	order queueOrder
}

func newQueuedCounts(rule queuedRule) *queuedCounts {
	return &queuedCounts{rule: rule, of: map[string]queueEntry{}, perNS: map[string]int{}}
}

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
		q.perNS[e.namespace]++
		q.order.insert(e)
	case !queued && was:
		delete(q.of, key)
		q.order.remove(e)
		if q.perNS[e.namespace]--; q.perNS[e.namespace] <= 0 {
			delete(q.perNS, e.namespace)
		}
	}
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
