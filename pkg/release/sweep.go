package release

import (
	"context"
	"fmt"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/release/lease"
)

// The sweeper's queries (pkg/sweeper's Store and Index ports), from caches where they can:
// at 10,000 pending revisions a LIST and a Lease GET per revision were a pass's whole cost.

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

// AliveIn reports whether l, a revision's heartbeat Lease as a cache holds it (nil: none),
// shows a live executor at now. Only "alive" is trusted from a cache: the caller reads an
// expired or missing one again (Store.LastSignOfLife) before acting on it.
func AliveIn(l *coordinationv1.Lease, now time.Time) bool {
	return l != nil && l.Spec.RenewTime != nil && l.Spec.LeaseDurationSeconds != nil && !lease.Expired(l, now)
}

// PendingRevisions lists the pending revisions of namespace ("" = all) from the API server,
// async-helm's and others' alike (Revision.Ours tells them apart).
func (s *Store) PendingRevisions(ctx context.Context, namespace string) ([]Revision, error) {
	list, err := s.Metadata.Resource(SecretsResource).Namespace(namespace).List(ctx, metav1.ListOptions{LabelSelector: SelectorPending})
	if err != nil {
		return nil, fmt.Errorf("list pending revisions of %q: %w", namespace, err)
	}
	out := make([]Revision, 0, len(list.Items))
	for i := range list.Items {
		if r, ok := RevisionFromMeta(&list.Items[i]); ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// ClaimRedrive records a re-send of rev's stored event (count, time, dead-letter mark
// cleared), if the Secret is still at rev.ResourceVersion: of two notifiers, or a notifier
// racing Helm's adoption, one loses (false) and sends nothing.
func (s *Store) ClaimRedrive(ctx context.Context, rev Revision, now time.Time) (bool, error) {
	return s.patchSecret(ctx, rev.Namespace, rev.SecretName, secretPatch{ResourceVersion: rev.ResourceVersion,
		Annotations: map[string]*string{AnnotationSent: ptr(strconv.Itoa(rev.Sent + 1)),
			AnnotationSentAt: ptr(now.UTC().Format(time.RFC3339Nano)), AnnotationDeadLettered: nil}}, "claim re-send of")
}

// MarkDeadLettered marks the pending revision of ours that requestID reserved for the
// sweeper to send again (the broker gave up on its event). False when the Secret is gone,
// final, not ours, or another request's.
func (s *Store) MarkDeadLettered(ctx context.Context, namespace, secretName, requestID string, at time.Time) (bool, error) {
	m, err := s.ReleaseMeta(ctx, namespace, secretName)
	if err != nil || m == nil {
		return false, err
	}
	rev, ok := RevisionFromMeta(m)
	if !ok || !rev.Ours || !IsPending(rev.Status) || rev.RequestID != requestID {
		return false, nil // finished, or not the request this event was for
	}
	return s.patchSecret(ctx, namespace, secretName, secretPatch{
		Annotations: map[string]*string{AnnotationDeadLettered: ptr(at.UTC().Format(time.RFC3339))}}, "mark dead-lettered")
}
