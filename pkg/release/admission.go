package release

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LabelSeal proves that async-helm itself reserved (or marked for uninstall) a queued
// revision for the request its request-id label names: a tenant can write the labels of
// any Secret of its namespace, but not this value (docs/design.md, "Release records are
// hostile input").
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

// sealLabels are the labels that seal a queued revision (none without a key).
func (s *Store) sealLabels(namespace, secretName, requestID string, into map[string]string) {
	if len(s.SealKey) > 0 {
		into[LabelSeal] = Seal(s.SealKey, namespace, secretName, requestID)
	}
}
