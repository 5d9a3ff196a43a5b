package release

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// queuedCounts keeps the number of queued reservations per namespace up to date from the
// informers' events, so the admission bound costs submit O(1) per request: counting
// through the index (ByIndex, or IndexKeys, which also sorts) walked every queued
// reservation and was 15-29% of submit's CPU at thousands queued (make bench's profile).
type queuedCounts struct {
	rule  queuedRule
	mu    sync.Mutex
	of    map[string]string // key -> namespace, for the queued ones
	perNS map[string]int
}

func newQueuedCounts(rule queuedRule) *queuedCounts {
	return &queuedCounts{rule: rule, of: map[string]string{}, perNS: map[string]int{}}
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
	q.mu.Lock()
	defer q.mu.Unlock()
	ns, was := q.of[key]
	switch {
	case queued && !was:
		q.of[key] = m.GetNamespace()
		q.perNS[m.GetNamespace()]++
	case !queued && was:
		delete(q.of, key)
		if q.perNS[ns]--; q.perNS[ns] <= 0 {
			delete(q.perNS, ns)
		}
	}
}

func (q *queuedCounts) count(namespace string) (inNamespace, total int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.perNS[namespace], len(q.of)
}

func (q *queuedCounts) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { q.set(obj, false) },
		UpdateFunc: func(_, obj any) { q.set(obj, false) },
		DeleteFunc: func(obj any) { q.set(obj, true) },
	}
}

// QueuedCount is the number of queued reservations in namespace and in all (Store.Queued).
func (x *RevisionIndex) QueuedCount(namespace string) (inNamespace, total int) {
	return x.queued.count(namespace)
}
