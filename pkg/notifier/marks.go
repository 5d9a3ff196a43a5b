package notifier

import (
	"context"
	"strings"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/signing"
)

// Recording a reported status (MarkNotified) is a compare-and-swap that rewrites the whole
// Secret, slow on a loaded API server: in watch mode a worker hands the key to the marks
// queue and goes on to the next event. A mark not made (a crash after the send) means one
// duplicate event, under the same id, which the contract allows.

// markReported records the status the index has for key when all seen of it was reported;
// otherwise the worker still reporting it queues the mark again.
func (s *Service) markReported(ctx context.Context, key string) error {
	m, err := s.Revisions.Get(key)
	if err != nil || m == nil {
		return err // deleted: nothing to record
	}
	rev, ok := release.RevisionFromMeta(m)
	if !ok || s.reported(rev) || !s.reportedAll(key, rev.Status) {
		return nil
	}
	return s.markNotified(ctx, rev)
}

// reportedAll: status is the last one observed of key and nothing of key awaits reporting.
func (s *Service) reportedAll(key, status string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.backlog[key]) == 0 && s.observed[key] == status && !s.history[key]
}

// markNotified records the reported status on the secret, signed, as a compare-and-swap:
// if Helm changed the secret meanwhile, the new status is reported next.
func (s *Service) markNotified(ctx context.Context, rev release.Revision) error {
	return s.Store.MarkNotified(ctx, rev, MarkSignature(s.SigningKey, rev))
}

// The mark of a reported status (release.AnnotationNotified) lives on the tenant's Secret,
// where a tenant's mark would silence that status for every later notifier. So a mark
// counts only with the notifier's signature over the record's namespace, Secret name and
// UID, request id and status: a tenant can only put back a true mark of this very record.

// reported reports whether rev's status carries the notifier's mark.
func (s *Service) reported(rev release.Revision) bool {
	if rev.Notified != rev.Status {
		return false
	}
	if !s.SigningKey.Set() { // a trusted run without a key: the mark alone
		return true
	}
	return s.SigningKey.Verify(signing.Notified, notifiedText(rev), rev.NotifiedSig)
}

// MarkSignature is the signature beside a mark of rev's status (release.AnnotationNotifiedSig;
// "" without a key).
func MarkSignature(key signing.Key, rev release.Revision) string {
	if !key.Set() {
		return ""
	}
	return key.Sign(signing.Notified, notifiedText(rev))
}

// notifiedText is what a mark's signature covers.
func notifiedText(rev release.Revision) string {
	return strings.Join([]string{rev.Namespace, rev.SecretName, string(rev.UID), rev.RequestID, rev.Status}, "\x00")
}
