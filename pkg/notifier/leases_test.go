package notifier

import (
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/async-helm/async-helm/pkg/release/lease"
)

// The Lease cache keeps no managedFields: it holds every heartbeat and tombstone Lease of
// the cluster in each notifier, and no reader of it uses them. It kept them before.
func TestTheLeaseCacheHoldsNoManagedFields(t *testing.T) {
	e := newEnv(t)
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web.v1",
		Labels: map[string]string{lease.LabelManagedBy: lease.ManagedByUs},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "executor", Operation: metav1.ManagedFieldsOperationUpdate,
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:renewTime":{}}}`)}}}}}
	if _, err := e.c.CoordinationV1().Leases("ns").Create(ctx(t), l, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var c leaseCache
	if err := c.watch(ctx(t), e.c, []string{metav1.NamespaceAll}, cache.ResourceEventHandlerFuncs{}); err != nil {
		t.Fatal(err)
	}
	got := c.get("ns", "web.v1")
	if got == nil {
		t.Fatal("the Lease is not cached")
	}
	if len(got.ManagedFields) != 0 || got.Labels[lease.LabelManagedBy] != lease.ManagedByUs {
		t.Errorf("cached Lease: managedFields %v, labels %v", got.ManagedFields, got.Labels)
	}
}
