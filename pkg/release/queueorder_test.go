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
	q := newQueuedCounts(queuedRule{sealKey: sealKey}, 0)
	q.clock = testingclock.NewFakePassiveClock(queueT0.Add(time.Hour))
	return q
}

func positionOf(t *testing.T, q *queuedCounts, ns, name string) int {
	t.Helper()
	p, ok := q.position(ns + "/" + SecretName(name, 1))
	if !ok {
		return 0
	}
	return p.Position
}

// The position is the order of acceptance over every namespace, and it goes down as the
// revisions accepted before start, whatever namespace they are in.
func TestQueuePositionsFollowAcceptance(t *testing.T) {
	q := newTestQueue()
	metas := map[string]*metav1.PartialObjectMetadata{}
	for i, n := range []string{"e", "d", "c", "b", "a"} { // e accepted first
		m := queuedMeta(fmt.Sprintf("ns%d", i%2), n, queueT0.Add(time.Duration(i)*time.Second), "pending-install")
		metas[n] = m
		q.set(m, false)
	}
	if got := positionOf(t, q, "ns0", "a"); got != 5 {
		t.Fatalf("a (accepted last) at %d, want 5", got)
	}
	p, _ := q.position("ns1/" + SecretName("d", 1))
	if p.Position != 2 || p.Total != 5 || !p.AcceptedAt.Equal(queueT0.Add(time.Second)) {
		t.Fatalf("d: %+v, want position 2 of 5 accepted at t0+1s", p)
	}
	q.set(started(metas["e"]), false) // an executor's Helm adopted e
	q.set(metas["d"], true)           // d was deleted
	if got := positionOf(t, q, "ns0", "a"); got != 3 {
		t.Fatalf("a at %d after two ahead of it left, want 3", got)
	}
	// One accepted later joins behind; a rewrite of a's labels does not move it.
	q.set(queuedMeta("ns9", "late", queueT0.Add(time.Minute), "pending-install"), false)
	moved := metas["a"].DeepCopy()
	moved.Labels[LabelModifiedAt] = "0"
	q.set(moved, false)
	if got, last := positionOf(t, q, "ns0", "a"), positionOf(t, q, "ns9", "late"); got != 3 || last != 4 {
		t.Fatalf("a at %d, late at %d; want 3 and 4", got, last)
	}
	if _, ok := q.position("ns1/" + SecretName("e", 1)); ok {
		t.Fatal("a started revision still has a position")
	}
}

// A tenant writes what it likes on the Secrets of its namespace: unsealed copies of the
// queued labels never enter the order, and an uninstall mark's modifiedAt (the only time a
// tenant can write) cannot put it before the Secret existed or after it was seen.
func TestQueuePositionIgnoresWhatATenantWrites(t *testing.T) {
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
	// A real uninstall mark on a revision created at t0+20s whose modifiedAt says 1970,
	// and one whose modifiedAt is far in the future.
	early := queuedMeta("tenant", "early", queueT0.Add(20*time.Second), StatusUninstalling)
	early.Labels[LabelModifiedAt] = "1"
	q.set(early, false)
	future := queuedMeta("tenant", "future", queueT0.Add(5*time.Second), StatusUninstalling)
	future.Labels[LabelModifiedAt] = strconv.FormatInt(queueT0.Add(1000*time.Hour).Unix(), 10)
	q.set(future, false)
	if got := positionOf(t, q, "victim", "web"); got != 1 {
		t.Fatalf("victim at %d, want 1: forged or back-dated revisions went ahead of it", got)
	}
	if p, _ := q.position("tenant/" + SecretName("future", 1)); !p.AcceptedAt.Equal(q.clock.Now()) {
		t.Fatalf("a mark dated in the future is accepted at %v, want when it was seen (%v)", p.AcceptedAt, q.clock.Now())
	}
	if in, total := q.count("tenant"); in != 2 || total != 3 {
		t.Fatalf("count = %d, %d; want 2, 3", in, total)
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

// BenchmarkQueuePosition is one row's position at 10,000 queued.
func BenchmarkQueuePosition(b *testing.B) {
	q, metas := fillQueue(b, 10000)
	for i := 0; i < b.N; i++ {
		m := metas[i%len(metas)]
		if _, ok := q.position(m.Namespace + "/" + m.Name); !ok {
			b.Fatal("not queued")
		}
	}
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

// BenchmarkQueueListOfAll is the queue part of a list whose 10,000 rows are all queued (an
// all-namespaces list at 10,000 pending): one position per row, no walk of the queue.
func BenchmarkQueueListOfAll(b *testing.B) {
	q, metas := fillQueue(b, 10000)
	for i := 0; i < b.N; i++ {
		for _, m := range metas {
			if _, ok := q.position(m.Namespace + "/" + m.Name); !ok {
				b.Fatal("not queued")
			}
		}
	}
}

// No namespace adds more than its share to the admission total: queued records one tenant
// keeps in its own namespace (say, seals it read once, written back on finished records)
// cannot fill the cluster's bound for every other namespace.
func TestOneNamespaceAddsAtMostItsShareToTheTotal(t *testing.T) {
	q := newQueuedCounts(queuedRule{sealKey: sealKey}, 3)
	q.clock = testingclock.NewFakePassiveClock(queueT0.Add(time.Hour))
	var hostile []*metav1.PartialObjectMetadata
	for i := range 10 {
		m := queuedMeta("hostile", fmt.Sprintf("r%d", i), queueT0, "pending-install")
		hostile = append(hostile, m)
		q.set(m, false)
	}
	q.set(queuedMeta("other", "web", queueT0, "pending-install"), false)
	if in, total := q.count("hostile"); in != 10 || total != 4 {
		t.Fatalf("count(hostile) = %d, %d; want 10 in the namespace, 4 in the total (3 + 1)", in, total)
	}
	for _, m := range hostile[:8] { // down to 2: under the share, each one leaving counts
		q.set(started(m), false)
	}
	if in, total := q.count("other"); in != 1 || total != 3 {
		t.Fatalf("count(other) = %d, %d; want 1 and 3 (2 + 1)", in, total)
	}
	if p, _ := q.position("other/" + SecretName("web", 1)); p.Total != 3 {
		t.Errorf("the queue position counts every queued revision: of %d, want 3", p.Total)
	}
}
