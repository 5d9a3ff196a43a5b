package notifier

import (
	"strings"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/signing"
)

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

// markSignature is the signature of rev's status as reported ("" without a key).
func (s *Service) markSignature(rev release.Revision) string { return MarkSignature(s.SigningKey, rev) }

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
