package release

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/signing"
)

// LabelSeal proves that async-helm itself reserved (or marked for uninstall) a queued
// revision for the request its request-id label names: a tenant can write the labels of
// its Secrets, but not this value.
const LabelSeal = "async-helm.io/seal"

// sealText is what the seal of the queued revision secretName of namespace for requestID
// signs (signing.Record).
func sealText(namespace, secretName, requestID string) string {
	return namespace + "/" + secretName + "/" + requestID
}

// Seal is the LabelSeal value of the queued revision secretName of namespace for requestID.
func Seal(key signing.Key, namespace, secretName, requestID string) string {
	return key.Sign(signing.Record, sealText(namespace, secretName, requestID))
}

// Sealed reports whether m carries the seal of its own namespace, name and request id.
func Sealed(key signing.Key, m metav1.Object) bool {
	l := m.GetLabels()
	return key.Verify(signing.Record, sealText(m.GetNamespace(), m.GetName(), l[LabelRequestID]), l[LabelSeal])
}

// sealLabels are the labels that seal a queued revision (none without a key).
func (s *Store) sealLabels(namespace, secretName, requestID string, into map[string]string) {
	if s.SealKey.Set() {
		into[LabelSeal] = Seal(s.SealKey, namespace, secretName, requestID)
	}
}
