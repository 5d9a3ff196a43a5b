package release

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/release/lease"
)

// What the notifier's sweeper reads from caches instead of the API server: at 10,000
// pending revisions a LIST per pass (or per namespace) and a Lease GET per revision were
// the pass's whole cost (docs/design.md, "Notifier").

// PendingRevisions lists the pending revisions in the index, async-helm's and others'
// alike (Revision.Ours tells them apart), without an API call. The cache may be behind the
// API server by a watch event: every write the sweeper makes from it carries the
// resourceVersion it read (a compare-and-swap), so a stale entry is skipped, never acted on.
func (x *RevisionIndex) PendingRevisions() []Revision {
	var out []Revision
	for _, inf := range x.informers {
		for _, obj := range inf.GetStore().List() {
			m, ok := obj.(*metav1.PartialObjectMetadata)
			if !ok || !IsPending(m.Labels[LabelStatus]) {
				continue
			}
			if r, ok := RevisionFromMeta(m); ok {
				out = append(out, r)
			}
		}
	}
	return out
}

// AliveIn reports whether l, a revision's heartbeat Lease as a cache holds it (nil: none
// cached), shows a live executor at now. Only "alive" is trusted from a cache: a Lease
// that looks expired or missing there may have been renewed since, so the caller reads it
// again (Store.LastSignOfLife) before acting on it.
func AliveIn(l *coordinationv1.Lease, now time.Time) bool {
	return l != nil && l.Spec.RenewTime != nil && l.Spec.LeaseDurationSeconds != nil && !lease.Expired(l, now)
}
