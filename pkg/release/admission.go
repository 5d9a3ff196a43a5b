package release

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LabelSeal proves that async-helm itself reserved (or marked for uninstall) a queued
// revision: a tenant can write the queued labels on any Secret of its namespace, but
// not this value, so only sealed revisions count toward submit's admission bound
// (docs/design.md, "Release records are hostile input").
const LabelSeal = "async-helm.io/seal"

// sealHexChars keeps the label value within 63 characters (160 bits of the HMAC).
const sealHexChars = 40

// Seal is the LabelSeal value of the queued revision secretName of namespace for
// requestID: hex(HMAC-SHA256(key, "async-helm seal\n" namespace/secret/request))[:40].
// The prefix keeps it distinct from an event signature made with the same key.
func Seal(key []byte, namespace, secretName, requestID string) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("async-helm seal\n" + namespace + "/" + secretName + "/" + requestID))
	return hex.EncodeToString(mac.Sum(nil))[:sealHexChars]
}

// Sealed reports whether m carries the seal of its own namespace, name and request id.
func Sealed(key []byte, m metav1.Object) bool {
	l := m.GetLabels()
	want := Seal(key, m.GetNamespace(), m.GetName(), l[LabelRequestID])
	return hmac.Equal([]byte(l[LabelSeal]), []byte(want))
}

// SealedRevision is Sealed for a revision read from its labels: submit reserved it, in this
// namespace under this name, for its request id (labels alone are the tenant's to write).
func SealedRevision(key []byte, r Revision) bool {
	return hmac.Equal([]byte(r.Seal), []byte(Seal(key, r.Namespace, r.SecretName, r.RequestID)))
}

// CountsAsQueued reports whether admission counts m, a release Secret's metadata, as a
// queued reservation (MAX_QUEUED, MAX_QUEUED_PER_NAMESPACE, queue positions): Helm's owner
// label (the index watches only those), the queued label and, with a key, async-helm's
// seal. With a key nothing else decides: a namespace editor writes every other label
// (status, revision, version, name) and the payload, and the executor runs a reservation
// only if it still counts when first consumed, so no relabel both escapes the count and
// runs. Only Reserve and MarkUninstalling write the queued label, on a pending record, and
// every way out of pending drops it (Helm's rewrite, MarkFailed, MarkUndecodable), deletes
// the record or puts the unmarked one back (docs/design.md, "Admission before 201").
// Without a key the labels are all there is: a queued revision of ours labelled pending.
func CountsAsQueued(key []byte, m metav1.Object) bool {
	l := m.GetLabels()
	if l[LabelOwner] != OwnerHelm || l[LabelQueued] != "true" {
		return false
	}
	if len(key) > 0 {
		return Sealed(key, m)
	}
	r, ok := RevisionFromMeta(m)
	return ok && r.Ours && IsPending(r.Status)
}

// queuedRule says which release secrets count as queued reservations (CountsAsQueued).
type queuedRule struct{ sealKey []byte }

func (q queuedRule) queued(obj any) bool {
	m, ok := obj.(metav1.Object)
	return ok && CountsAsQueued(q.sealKey, m)
}

func (q queuedRule) index(obj any) ([]string, error) {
	if !q.queued(obj) {
		return nil, nil
	}
	return []string{queuedAll, obj.(metav1.Object).GetNamespace()}, nil
}

// sealLabels are the labels that make a queued revision count (none without a key).
func (s *Store) sealLabels(namespace, secretName, requestID string, into map[string]string) {
	if len(s.SealKey) > 0 {
		into[LabelSeal] = Seal(s.SealKey, namespace, secretName, requestID)
	}
}
