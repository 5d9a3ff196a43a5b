package kube

import (
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// DropManagedFields empties an object's managedFields and leaves the rest of it, and
// anything that is not an object, as it was.
func TestDropManagedFields(t *testing.T) {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: map[string]string{"a": "b"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "executor"}}}}
	out, err := DropManagedFields(l)
	got, ok := out.(*coordinationv1.Lease)
	if err != nil || !ok || got.ManagedFields != nil || got.Name != "x" || got.Labels["a"] != "b" {
		t.Errorf("DropManagedFields: %+v, %v", out, err)
	}
	tomb := cache.DeletedFinalStateUnknown{Key: "ns/x"}
	if out, err := DropManagedFields(tomb); err != nil || out != tomb {
		t.Errorf("DropManagedFields of a tombstone: %+v, %v", out, err)
	}
}
