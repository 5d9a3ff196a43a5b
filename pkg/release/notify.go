package release

import (
	"context"
	"fmt"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What the notifier does to release Secrets, each a metadata read or one merge patch
// (secretPatch): the notifier holds no Secrets client of its own.

// ReleaseMeta reads the metadata of one release Secret from the API server (nil when gone).
func (s *Store) ReleaseMeta(ctx context.Context, namespace, secretName string) (*metav1.PartialObjectMetadata, error) {
	m, err := s.Metadata.Resource(SecretsResource).Namespace(namespace).Get(ctx, secretName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s/%s: %w", namespace, secretName, err)
	}
	return m, nil
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

// MarkNotified records rev.Status as reported (AnnotationNotified), if the Secret is still
// at rev.ResourceVersion: if Helm changed it meanwhile, the new status is reported next.
func (s *Store) MarkNotified(ctx context.Context, rev Revision) error {
	_, err := s.patchSecret(ctx, rev.Namespace, rev.SecretName, secretPatch{ResourceVersion: rev.ResourceVersion,
		Annotations: map[string]*string{AnnotationNotified: ptr(rev.Status)}}, "record reported status of")
	return err
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
