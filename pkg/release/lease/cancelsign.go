package lease

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
)

// AnnotationCancelSignature proves a cancel request on a Lease was written by submit for
// the caller it names: an HMAC over the Lease's namespace and name and the canceller,
// with the key submit signs events with. Anyone who may patch Leases in a namespace can
// write AnnotationCancel; only submit can sign it.
const AnnotationCancelSignature = "async-helm.io/cancel-signature"

func cancelSignature(key []byte, namespace, name, by string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("async-helm cancel v1\x00" + namespace + "\x00" + name + "\x00" + by))
	return hex.EncodeToString(m.Sum(nil))
}

// cancelBy is the canceller a Lease's annotations name, when h may honour it: with a
// CancelKey, only a request whose signature verifies.
func (h *Heartbeat) cancelBy(namespace, name string, ann map[string]string) string {
	by := ann[AnnotationCancel]
	if by == "" || len(h.CancelKey) == 0 {
		return by
	}
	want := cancelSignature(h.CancelKey, namespace, name, by)
	if !hmac.Equal([]byte(want), []byte(ann[AnnotationCancelSignature])) {
		return ""
	}
	return by
}

// cancelAnnotations are the annotations a cancel request writes.
func (h *Heartbeat) cancelAnnotations(namespace, name, by string) map[string]string {
	ann := map[string]string{AnnotationCancel: by}
	if len(h.CancelKey) > 0 {
		ann[AnnotationCancelSignature] = cancelSignature(h.CancelKey, namespace, name, by)
	}
	return ann
}
