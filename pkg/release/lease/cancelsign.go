package lease

import "github.com/async-helm/async-helm/pkg/signing"

// AnnotationCancelSignature proves a cancel request on a Lease was written by submit for the
// caller it names: signing.Cancel over the Lease's namespace and name, the request it stops
// and the canceller. Anyone who may patch Leases can write (or copy) AnnotationCancel; only
// submit can sign it, and only for the request the executor runs.
const AnnotationCancelSignature = "async-helm.io/cancel-signature"

// cancelText is what a cancel's signature (signing.Cancel) covers.
func cancelText(namespace, name, requestID, by string) string {
	return namespace + "\x00" + name + "\x00" + requestID + "\x00" + by
}

// cancelBy is the canceller a Lease's annotations name, when h may honour it: with a
// CancelKey, only a request whose signature verifies for the request requestID.
func (h *Heartbeat) cancelBy(namespace, name, requestID string, ann map[string]string) string {
	by := ann[AnnotationCancel]
	if by == "" || !h.CancelKey.Set() {
		return by
	}
	if !h.CancelKey.Verify(signing.Cancel, cancelText(namespace, name, requestID, by), ann[AnnotationCancelSignature]) {
		return ""
	}
	return by
}

// cancelAnnotations are the annotations a cancel request writes.
func (h *Heartbeat) cancelAnnotations(namespace, name, requestID, by string) map[string]string {
	ann := map[string]string{AnnotationCancel: by}
	if h.CancelKey.Set() {
		ann[AnnotationCancelSignature] = h.CancelKey.Sign(signing.Cancel, cancelText(namespace, name, requestID, by))
	}
	return ann
}
