package ledger

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// Entries of a namespace that no longer exists stop counting, and their Leases are
// deleted, even when no replica saw the namespace's delete (they were listed at start-up):
// after two sweeps that find it missing, not one (the namespace informer may lag).
func TestEntriesOfANamespaceThatIsGoneStopCounting(t *testing.T) {
	b := NewBook(time.Hour, nil)
	at := time.Now()
	b.AddedBatch("ledger-b-1", []Entry{
		{RequestID: "r1", Namespace: "live", Caller: "c", SecretName: "s1", At: at},
		{RequestID: "r2", Namespace: "gone", Caller: "c", SecretName: "s2", At: at},
	})
	b.Added(Entry{RequestID: "r3", Namespace: "gone", Caller: "c", SecretName: "s3", At: at})
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	if err := store.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "live"}}); err != nil {
		t.Fatal(err)
	}
	g := &nsGone{store: store, synced: func() bool { return true }}
	g.sweep(b)
	if c := b.Counts("gone", "c"); c.Total != 3 || c.Namespace != 2 {
		t.Fatalf("after one sweep: %+v, want still counted (3 in all, 2 in gone)", c)
	}
	g.sweep(b)
	if c := b.Counts("gone", "c"); c.Total != 1 || c.Namespace != 0 {
		t.Errorf("after two sweeps: %+v, want only live's entry counted", c)
	}
	stale := b.Expire()
	if len(stale) != 1 || stale[0] != Name("r3") {
		t.Errorf("Leases to delete %v, want only r3's (the batch still holds live's entry)", stale)
	}
	// A namespace that comes back (or was only late in the informer) is not cleared.
	b.Added(Entry{RequestID: "r4", Namespace: "new", Caller: "c", SecretName: "s4", At: at})
	g.sweep(b)
	if err := store.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "new"}}); err != nil {
		t.Fatal(err)
	}
	g.sweep(b)
	if c := b.Counts("new", "c"); c.Namespace != 1 {
		t.Errorf("a namespace seen late: %+v, want its entry counted", c)
	}
}

// A replica starts with hours of consumed records, most of them of namespaces deleted
// since: those stop counting at once, not after two sweeps; the live namespace's count.
func TestRetainedRecordsOfMissingNamespacesDoNotCountAtStart(t *testing.T) {
	b := NewBook(time.Hour, nil)
	for i, ns := range []string{"live", "gone", "gone"} {
		b.ConsumedAs(fmt.Sprintf("consumed-%d", i), Consumption{Namespace: ns, At: time.Now()})
	}
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	if err := store.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "live"}}); err != nil {
		t.Fatal(err)
	}
	(&nsGone{store: store, synced: func() bool { return true }}).retainedOfMissing(b)
	if got, want := b.Counts("live", "").Retained, (Tally{Total: 1, Namespace: 1, Namespaces: 1}); got != want {
		t.Errorf("retained at start %+v, want %+v", got, want)
	}
}
