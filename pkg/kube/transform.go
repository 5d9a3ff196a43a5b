package kube

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// DropManagedFields is an informer transform (cache.SharedIndexInformer.SetTransform) that
// drops an object's managedFields before the cache keeps it: no reader of async-helm's
// caches uses them, and they are often most of a small object's metadata (a Lease the
// ledger or an executor rewrites carries an entry per manager and subresource).
func DropManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return obj, nil
}
