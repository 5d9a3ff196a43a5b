package release

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"
)

var queueT0 = time.Date(2026, 12, 3, 22, 0, 0, 0, time.UTC)

// queuedMeta is a queued revision's metadata as the index sees it, sealed with sealKey.
func queuedMeta(ns, name string, created time.Time, status string) *metav1.PartialObjectMetadata {
	secret := SecretName(name, 1)
	l := map[string]string{LabelOwner: OwnerHelm, LabelName: name, LabelStatus: status, LabelVersion: "1",
		LabelRevision: "1", LabelQueued: "true", LabelRequestID: "req-" + name,
		LabelModifiedAt: strconv.FormatInt(created.Unix(), 10)}
	if status == StatusUninstalling {
		l[LabelAction] = string(ActionUninstall)
	}
	l[LabelSeal] = Seal(sealKey, ns, secret, "req-"+name)
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secret, Labels: l,
		CreationTimestamp: metav1.NewTime(created)}}
}

func started(m *metav1.PartialObjectMetadata) *metav1.PartialObjectMetadata {
	c := m.DeepCopy()
	delete(c.Labels, LabelQueued)
	return c
}

func newTestQueue() *queuedCounts {
	q := newQueuedCounts(queuedRule{sealKey: sealKey})
	q.clock = testingclock.NewFakePassiveClock(queueT0.Add(time.Hour))
	return q
}

// A tenant writes what it likes on the Secrets of its namespace: unsealed copies of the
// queued labels never enter the notifier's queue metrics, and an uninstall mark's
// modifiedAt (the only time a tenant can write) cannot date it before the Secret existed or
// after it was seen.
func TestQueueMetricsIgnoreWhatATenantWrites(t *testing.T) {
	q := newTestQueue()
	victim := queuedMeta("victim", "web", queueT0.Add(10*time.Second), "pending-install")
	q.set(victim, false)
	for i := 0; i < 50; i++ {
		forged := queuedMeta("tenant", fmt.Sprintf("f%d", i), queueT0, "pending-install")
		forged.Labels[LabelSeal] = victim.Labels[LabelSeal] // a seal copied from another Secret
		q.set(forged, false)
		unsealed := queuedMeta("tenant", fmt.Sprintf("u%d", i), queueT0, "pending-install")
		delete(unsealed.Labels, LabelSeal)
		q.set(unsealed, false)
	}
	early := queuedMeta("tenant", "early", queueT0.Add(20*time.Second), StatusUninstalling)
	early.Labels[LabelModifiedAt] = "1"
	q.set(early, false)
	got := q.byNamespace()
	if len(got) != 2 || got[0].Namespace != "tenant" || got[0].Count != 1 || !got[0].Oldest.Equal(queueT0.Add(20*time.Second)) ||
		got[1].Count != 1 {
		t.Fatalf("byNamespace = %+v, want tenant's one mark dated at its creation, and victim's one", got)
	}
}

func TestQueueByNamespace(t *testing.T) {
	q := newTestQueue()
	q.set(queuedMeta("b", "x", queueT0.Add(3*time.Second), "pending-install"), false)
	q.set(queuedMeta("a", "y", queueT0.Add(2*time.Second), "pending-upgrade"), false)
	q.set(queuedMeta("b", "z", queueT0.Add(1*time.Second), "pending-install"), false)
	got := q.byNamespace()
	want := []NamespaceQueue{{"a", 1, queueT0.Add(2 * time.Second)}, {"b", 2, queueT0.Add(time.Second)}}
	if len(got) != 2 || got[0].Namespace != want[0].Namespace || got[0].Count != 1 || !got[0].Oldest.Equal(want[0].Oldest) ||
		got[1].Namespace != "b" || got[1].Count != 2 || !got[1].Oldest.Equal(want[1].Oldest) {
		t.Fatalf("byNamespace = %+v, want %+v", got, want)
	}
}

func fillQueue(b *testing.B, n int) (*queuedCounts, []*metav1.PartialObjectMetadata) {
	q := newTestQueue()
	metas := make([]*metav1.PartialObjectMetadata, n)
	for i := range metas {
		metas[i] = queuedMeta(fmt.Sprintf("ns%d", i%100), fmt.Sprintf("r%d", i), queueT0.Add(time.Duration(i/20)*time.Second), "pending-install")
		q.set(metas[i], false)
	}
	b.ResetTimer()
	return q, metas
}

// BenchmarkQueueChurn is a burst at 10,000 queued: the oldest starts, a new one joins.
func BenchmarkQueueChurn(b *testing.B) {
	q, metas := fillQueue(b, 10000)
	for i := 0; i < b.N; i++ {
		oldest := metas[i%len(metas)]
		q.set(started(oldest), false)
		q.set(oldest, false) // joins again, at its own (old) time: the worst case, an insert at the front
	}
}

// BenchmarkQueueByNamespace is a metrics scrape at 10,000 queued in 100 namespaces.
func BenchmarkQueueByNamespace(b *testing.B) {
	q, _ := fillQueue(b, 10000)
	for i := 0; i < b.N; i++ {
		if len(q.byNamespace()) != 100 {
			b.Fatal("namespaces")
		}
	}
}
