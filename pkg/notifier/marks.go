package notifier

import (
	"context"
	"strings"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/signing"
)

// Recording a reported status is a compare-and-swap of the whole Secret: in watch mode a mark
// worker does it. A mark lost to a crash means one duplicate event, same id (allowed).

// markReported records the status the index has for key if all seen of it was reported.
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

// markNotified records the reported status, signed, by compare-and-swap (a change is reported next).
func (s *Service) markNotified(ctx context.Context, rev release.Revision) error {
	return s.Store.MarkNotified(ctx, rev, MarkSignature(s.SigningKey, rev))
}

// A mark on the tenant's Secret counts only with the notifier's signature over its namespace,
// name, UID, request and status: a tenant can only put back a true mark of this very record.

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

// MarkSignature is the signature beside a mark of rev's status ("" without a key).
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
