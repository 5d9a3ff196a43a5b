package release

import (
	"cmp"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// queueEntry is one queued revision in the service-wide order of acceptance.
type queueEntry struct {
	at        int64 // acceptance, unix seconds (acceptedAt)
	namespace string
	key       string // "<namespace>/<secret name>"
}

// compareEntries orders by acceptance, then by key: the same order in every replica of
// submit (creationTimestamp has a resolution of one second), so a user whose polls go to
// different pods sees one position.
func compareEntries(a, b queueEntry) int {
	if c := cmp.Compare(a.at, b.at); c != 0 {
		return c
	}
	return cmp.Compare(a.key, b.key)
}

// queueOrder keeps the queued revisions sorted by acceptance, so a metrics scrape finds
// each namespace's oldest in one walk. An insert or a removal moves at most the slice's
// tail (a memmove of 10,000 entries, a few µs: BenchmarkQueueChurn), and a burst mostly
// appends at the end and removes at the front.
type queueOrder struct{ sorted []queueEntry }

func (o *queueOrder) insert(e queueEntry) {
	i, found := slices.BinarySearchFunc(o.sorted, e, compareEntries)
	if !found {
		o.sorted = slices.Insert(o.sorted, i, e)
	}
}

func (o *queueOrder) remove(e queueEntry) {
	if i, found := slices.BinarySearchFunc(o.sorted, e, compareEntries); found {
		o.sorted = slices.Delete(o.sorted, i, i+1)
	}
}

// acceptedAt is when a queued revision was accepted, as far as a tenant cannot move it:
// a reservation's creationTimestamp (the API server sets it); an uninstall mark's
// modifiedAt label (a tenant can write it) held between the Secret's creation and the
// moment this index first saw the mark, so a rewritten label can move only the tenant's
// own marks, and never ahead of when they existed or behind when they were seen.
func acceptedAt(m metav1.Object, r Revision, seen time.Time) time.Time {
	at := r.Created
	if created := m.GetCreationTimestamp().Time; at.Before(created) {
		at = created
	}
	if at.After(seen) {
		at = seen
	}
	return at
}

// NamespaceQueue is the queue of one namespace: how many revisions wait, and since when
// the oldest one.
type NamespaceQueue struct {
	Namespace string
	Count     int
	Oldest    time.Time
}

// QueueByNamespace is the queue of every namespace with queued revisions, sorted by
// namespace. One walk of the queued revisions: for metrics scrapes, not for requests.
func (x *RevisionIndex) QueueByNamespace() []NamespaceQueue {
	return x.queued.byNamespace()
}
