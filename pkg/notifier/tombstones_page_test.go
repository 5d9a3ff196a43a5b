package notifier

// Review 6, J4: since c14499a a namespace whose Leases fill the Lease cache
// (MaxLeasesPerNamespace) is "full", and the leader's every sweep pass lists that
// namespace's tombstone Leases from the API server, whole and unpaged: what the cache
// trims to 16 KiB a value, the pass reads in full, every SWEEP_INTERVAL.

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/release/lease"
)

// 1,100 Leases a namespace editor labels as tombstones, 200 KiB of annotation each (a Lease
// may carry 256 KiB): they fill the namespace's place in the cache, and each sweep pass
// reads all of them. Want: one pass allocates within a few MiB (the cache's own bound per
// Lease times a page), not the namespace's whole Leases.
func TestAFullNamespacesTombstonesAreReadAPageAPass(t *testing.T) {
	e := newEnv(t)
	pad := strings.Repeat("x", 200<<10)
	const n = MaxLeasesPerNamespace + 76
	for i := 0; i < n; i++ {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("grave-%d", i),
			Labels: map[string]string{lease.LabelManagedBy: lease.ManagedByUs, lease.LabelAction: lease.ActionUninstall,
				lease.LabelRelease: fmt.Sprintf("r%d", i), lease.LabelRevision: "1"},
			Annotations: map[string]string{"pad": pad}}}
		if _, err := e.c.CoordinationV1().Leases("ns").Create(ctx(t), l, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.svc.Start(ctx(t), true); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if _, full, _ := e.svc.leases.list(); slices.Contains(full, "ns") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the namespace never filled the cache")
		}
	}
	// What the API server would send the notifier for its Lease lists (JSON), and so what it
	// decodes: the fake shares string data between copies, so allocation cannot show it.
	var listed, lists atomic.Int64
	gvr := schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
	gvk := schema.GroupVersionKind{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"}
	e.c.Clientset.PrependReactor("list", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		la := a.(k8stesting.ListAction)
		lists.Add(1)
		obj, err := e.c.Clientset.Tracker().List(gvr, gvk, a.GetNamespace())
		if err != nil {
			t.Logf("tracker list: %v", err)
			return false, nil, nil
		}
		sel := la.GetListRestrictions().Labels
		if sel == nil {
			sel = labels.Everything()
		}
		// Answered as the API server does: at most Limit items, then a continue token (here
		// the offset of the next item; the fake answers all at once).
		opts := la.(k8stesting.ListActionImpl).ListOptions
		from, _ := strconv.Atoi(opts.Continue)
		page := &coordinationv1.LeaseList{}
		for i, l := range obj.(*coordinationv1.LeaseList).Items {
			if i < from || !sel.Matches(labels.Set(l.Labels)) {
				continue
			}
			if opts.Limit > 0 && int64(len(page.Items)) == opts.Limit {
				page.Continue = strconv.Itoa(i)
				break
			}
			page.Items = append(page.Items, l)
			b, _ := json.Marshal(l)
			listed.Add(int64(len(b)))
		}
		return true, page, nil
	})
	if err := e.svc.QueueTombstones(ctx(t)); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d tombstone-labelled Leases of 200 KiB in one namespace: one sweep pass's QueueTombstones made %d Lease lists of %d MiB in all",
		n, lists.Load(), listed.Load()>>20)
	if listed.Load() > 32<<20 {
		t.Errorf("one sweep pass read %d MiB of a full namespace's tombstone Leases, whole and unpaged (the cache keeps 16 KiB a value)", listed.Load()>>20)
	}
}
