package notifier

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/async-helm/async-helm/internal/testwait"
	"github.com/async-helm/async-helm/pkg/release"
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

// A Lease a tenant labels as ours is cached with only what the cache's readers use: a
// tombstone's labels and annotations and an executor's progress stay, anything else (or a
// value past maxLeaseValue) is not held.
func TestTheLeaseCacheKeepsOnlyWhatItsReadersUse(t *testing.T) {
	e := newEnv(t)
	big := strings.Repeat("x", 200<<10)
	progress := `{"phase":"waiting","ready":0,"total":1,"updated":"2026-01-01T00:00:00Z"}`
	renew, secs := metav1.NewMicroTime(t0), int32(30)
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web.v1",
		Labels: map[string]string{lease.LabelManagedBy: lease.ManagedByUs, lease.LabelAction: lease.ActionUninstall,
			lease.LabelRelease: "web", lease.LabelRevision: "1", lease.LabelRequestID: "req-1", "tenant/extra": "x"},
		Annotations: map[string]string{lease.AnnotationSecretUID: "uid-1", lease.AnnotationOutcome: lease.OutcomeUninstalled,
			lease.AnnotationProgress: progress, "tenant/big": big, lease.AnnotationCancel: big}},
		Spec: coordinationv1.LeaseSpec{RenewTime: &renew, LeaseDurationSeconds: &secs}}
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
	held := 0
	for k, v := range got.Labels {
		held += len(k) + len(v)
	}
	for k, v := range got.Annotations {
		held += len(k) + len(v)
	}
	if held > 1<<10 {
		t.Errorf("the cached Lease holds %d bytes of labels and annotations: %v", held, slices.Sorted(maps.Keys(got.Annotations)))
	}
	if _, ok := got.Labels["tenant/extra"]; ok {
		t.Error("a label no reader uses is cached")
	}
	tomb, ok := lease.TombstoneFrom(got)
	if !ok || !tomb.Done || tomb.Name != "web" || tomb.Revision != 1 || tomb.RequestID != "req-1" || tomb.SecretUID != "uid-1" {
		t.Errorf("the cached tombstone reads %+v, %v", tomb, ok)
	}
	if got.Annotations[lease.AnnotationProgress] != progress {
		t.Errorf("progress %q", got.Annotations[lease.AnnotationProgress])
	}
	if !lease.ExpiresAt(got).Equal(t0.Add(30 * time.Second)) {
		t.Errorf("the cached Lease expires at %v", lease.ExpiresAt(got))
	}
}

// Attack (review 5, H4, the count): a namespace editor labels any number of Leases as ours
// and every notifier cached them all, each up to the size bound. A namespace's Leases are
// cached up to MaxLeasesPerNamespace; the rest of that namespace's are not held, and
// another namespace's are cached as before.
func TestTheLeaseCacheHoldsABoundedCountPerNamespace(t *testing.T) {
	e := newEnv(t)
	flood := MaxLeasesPerNamespace + 300
	for i := 0; i < flood; i++ {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "flood", Name: fmt.Sprintf("junk-%d", i),
			Labels: map[string]string{lease.LabelManagedBy: lease.ManagedByUs}}}
		if _, err := e.c.CoordinationV1().Leases("flood").Create(ctx(t), l, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	other := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web.v1",
		Labels: map[string]string{lease.LabelManagedBy: lease.ManagedByUs}}}
	if _, err := e.c.CoordinationV1().Leases("ns").Create(ctx(t), other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var c leaseCache
	if err := c.watch(ctx(t), e.c, []string{metav1.NamespaceAll}, cache.ResourceEventHandlerFuncs{}); err != nil {
		t.Fatal(err)
	}
	cached, full, _ := c.list()
	perNS := map[string]int{}
	for _, l := range cached {
		perNS[l.Namespace]++
	}
	if perNS["flood"] > MaxLeasesPerNamespace+1 {
		t.Errorf("the cache holds %d of the flooding namespace's %d Leases, over %d", perNS["flood"], flood, MaxLeasesPerNamespace)
	}
	if c.get("ns", "web.v1") == nil {
		t.Error("another namespace's Lease is not cached")
	}
	if !slices.Equal(full, []string{"flood"}) {
		t.Errorf("namespaces whose Leases are not all cached: %v, want [flood]", full)
	}
}

// In a namespace whose Leases the cache does not all hold, an uninstall's tombstone (made
// after the flood, so not cached) is still reported: the sweep lists that namespace's
// tombstones from the API server.
func TestAnUninstallInAFloodedNamespaceIsReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.upgraded("web")
		for i := 0; i < MaxLeasesPerNamespace; i++ {
			l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("junk-%d", i),
				Labels: map[string]string{lease.LabelManagedBy: lease.ManagedByUs}}}
			if _, err := e.c.CoordinationV1().Leases("ns").Create(ctx(t), l, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.svc.Start(ctx(t), true); err != nil {
			t.Fatal(err)
		}
		testwait.For(t, func() bool { return e.Revision("web", 2).Notified == "deployed" })
		before := len(e.sink.Events())
		e.uninstall("web", []int{1, 2}, true)
		testwait.For(t, func() bool { return len(e.sink.Events()) == before+1 }) // uninstalling
		synctest.Wait()
		if e.svc.CachedLease("ns", release.LeaseName("web", 2)) != nil {
			t.Fatal("the uninstall's Lease is cached: the namespace is not past the bound")
		}
		e.sweepTombstones()
		testwait.For(t, func() bool { return len(e.sink.Events()) == before+2 && e.tombstones() == 0 })
		e.checkUninstalled(e.sink.Events()[before+1])
	})
}
