package notifier

import (
	"context"
	"strings"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/signing"
)

// Recording a reported status (MarkNotified) is a compare-and-swap that rewrites the whole
// Secret, slow on a loaded API server: in watch mode a worker hands the key to the marks
// queue and goes on to the next event; a mark worker records the status the secret has in
// the index if every status seen of it was reported. A mark not made (a crash after the
// send) means one duplicate event after a restart, under the same id, which the contract
// allows.

// processMark records one secret's reported status; false when the queue shut down.
func (s *Service) processMark(ctx context.Context) bool {
	key, quit := s.marks.Get()
	if quit {
		return false
	}
	defer s.marks.Done(key)
	if err := s.markReported(ctx, key); err != nil {
		if ctx.Err() == nil {
			s.Log.Warnw("reported status not recorded yet; will retry", "key", key, "retries", s.marks.NumRequeues(key), "error", err)
		}
		s.marks.AddRateLimited(key)
		return true
	}
	s.marks.Forget(key)
	return true
}

// markReported records the status the index has for key when all that was seen of it was
// reported; otherwise the worker still reporting it queues the mark again when done.
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

// markNotified records the reported status on the secret, signed (MarkSignature), as a
// compare-and-swap (Store.MarkNotified): if Helm changed the secret meanwhile, the new
// status is reported next.
func (s *Service) markNotified(ctx context.Context, rev release.Revision) error {
	return s.Store.MarkNotified(ctx, rev, MarkSignature(s.SigningKey, rev))
}

// The mark of a reported status (release.AnnotationNotified) lives on the tenant's Secret,
// where the tenant can write it: set to the current status, it silenced that status for
// every notifier that started later, an admin's action on the release included. So the
// notifier signs its mark (release.AnnotationNotifiedSig, signing.Notified) over the
// record's namespace, Secret name and UID, request id and status, and a mark counts only
// with that signature: written by a tenant, or copied from another record, request or
// status, it is no mark. A tenant can still put back a mark the notifier made for this very
// record, request and status; that says only what is true (that status was reported).

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

// MarkSignature is the signature a notifier signing with key puts beside its mark of rev's
// status (release.AnnotationNotifiedSig; "" without a key): what a record already reported
// carries.
func MarkSignature(key signing.Key, rev release.Revision) string {
	if !key.Set() {
		return ""
	}
	return key.Sign(signing.Notified, notifiedText(rev))
}

// notifiedText is what a mark's signature covers: which record, of which request, in which
// status.
func notifiedText(rev release.Revision) string {
	return strings.Join([]string{rev.Namespace, rev.SecretName, string(rev.UID), rev.RequestID, rev.Status}, "\x00")
}
