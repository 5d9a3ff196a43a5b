package notifier

import (
	"strings"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// keysByNamespace is both queues' storage (workqueue.Queue, under its lock): a FIFO of keys per
// namespace, the namespaces served in turn, so a tenant flipping many Secrets holds no one else's
// events back (every tenant shares the notifier's workers).
type keysByNamespace struct {
	keys map[string][]string
	turn []string
	n    int
}

func newKeysByNamespace() *keysByNamespace { return &keysByNamespace{keys: map[string][]string{}} }

// Touch: a key queued again keeps its place (the workqueue holds it once).
func (q *keysByNamespace) Touch(string) {}

// Push adds key at the back of its namespace's keys; a namespace with none joins the turn.
func (q *keysByNamespace) Push(key string) {
	ns := keyNamespace(key)
	if len(q.keys[ns]) == 0 {
		q.turn = append(q.turn, ns)
	}
	q.keys[ns] = append(q.keys[ns], key)
	q.n++
}

// Len is how many keys are held.
func (q *keysByNamespace) Len() int { return q.n }

// Pop takes the first key of the namespace whose turn it is (then back of the turn); Len is not 0.
func (q *keysByNamespace) Pop() string {
	ns := q.turn[0]
	q.turn[0] = ""
	q.turn = q.turn[1:]
	ks := q.keys[ns]
	key := ks[0]
	ks[0] = ""
	if len(ks) == 1 {
		delete(q.keys, ns)
	} else {
		q.keys[ns] = ks[1:]
		q.turn = append(q.turn, ns)
	}
	if len(q.turn) == 0 {
		q.turn = nil // the turn's array is not kept once drained
	}
	q.n--
	return key
}

// keyNamespace is the namespace of a key: "namespace/secret" or "tombstone:namespace/lease".
func keyNamespace(key string) string {
	ns, _, _ := strings.Cut(strings.TrimPrefix(key, tombstoneKey), "/")
	return ns
}

// newKeyQueue is a workqueue over keysByNamespace, retrying a key after 100 ms, doubled to 30 s.
func newKeyQueue(name string) workqueue.TypedRateLimitingInterface[string] {
	base := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Name: name, Queue: newKeysByNamespace()})
	delaying := workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{Name: name, Queue: base})
	return workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 30*time.Second),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: name, DelayingQueue: delaying})
}
