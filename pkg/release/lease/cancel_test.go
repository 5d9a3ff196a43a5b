package lease

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/async-helm/async-helm/pkg/release/storage"
)

// Sync writes the progress annotation only when it changed, notices a cancel request, and
// never overwrites another holder's lease.
func TestSyncAndCancelRequest(t *testing.T) {
	a, _, c, clock := heartbeats(t)
	key := storage.Key("web", 1)
	held, err := a.Hold(ctx(t), "ns", key)
	if err != nil || held == nil {
		t.Fatal(held, err)
	}
	if lost, err := held.Sync(ctx(t), AnnotationProgress, `{"phase":"installing"}`); lost != "" || err != nil {
		t.Fatalf("Sync = %q, %v", lost, err)
	}
	if got := lease(t, c).Annotations[AnnotationProgress]; got != `{"phase":"installing"}` {
		t.Errorf("annotation %q", got)
	}
	rv := lease(t, c).ResourceVersion
	if lost, err := held.Sync(ctx(t), AnnotationProgress, `{"phase":"installing"}`); lost != "" || err != nil || lease(t, c).ResourceVersion != rv {
		t.Errorf("an unchanged value was written again: %q, %v", lost, err)
	}
	if held.CancelledBy() != "" {
		t.Error("cancelled before anyone asked")
	}

	// A cancel request while the action runs lands on the lease; the next Sync sees it,
	// and its own write (stale resourceVersion) does not erase the request.
	cancelling := &Heartbeat{Client: c, Holder: "submit", Duration: time.Hour, Clock: clock}
	running, err := cancelling.RequestCancel(ctx(t), "ns", key, "", "alice")
	if err != nil || !running {
		t.Fatalf("RequestCancel of a running revision = %v, %v", running, err)
	}
	if lost, err := held.Sync(ctx(t), AnnotationProgress, `{"phase":"waiting"}`); lost != "" || err != nil {
		t.Fatalf("Sync after the request = %q, %v", lost, err)
	}
	if held.CancelledBy() != "alice" || lease(t, c).Annotations[AnnotationCancel] != "alice" {
		t.Errorf("cancel request lost: held %q, lease %v", held.CancelledBy(), lease(t, c).Annotations)
	}
	if err := held.Release(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if lost, _ := held.Sync(ctx(t), AnnotationProgress, "x"); lost != "the lease was deleted" {
		t.Errorf("Sync of a deleted lease: %q", lost)
	}
}

// A cancel of a revision nobody runs takes its lease (no executor can start it), and only
// the same canceller's ReleaseCancel deletes it.
func TestCancelOfAnIdleRevision(t *testing.T) {
	a, _, c, clock := heartbeats(t)
	key := storage.Key("web", 1)
	submit := &Heartbeat{Client: c, Holder: "submit", Duration: time.Hour, Clock: clock}
	running, err := submit.RequestCancel(ctx(t), "ns", key, "", "alice")
	if err != nil || running {
		t.Fatalf("RequestCancel of an idle revision = %v, %v", running, err)
	}
	if h, err := a.Hold(ctx(t), "ns", key); h != nil || err != nil {
		t.Fatalf("an executor took a lease held by the cancel: %v, %v", h, err)
	}
	if err := submit.ReleaseCancel(ctx(t), "ns", key, "bob"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoordinationV1().Leases("ns").Get(ctx(t), key, metav1.GetOptions{}); err != nil {
		t.Error("another canceller's ReleaseCancel deleted the lease")
	}
	if err := submit.ReleaseCancel(ctx(t), "ns", key, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoordinationV1().Leases("ns").Get(ctx(t), key, metav1.GetOptions{}); err == nil {
		t.Error("the cancel's lease stayed")
	}
	if err := submit.ReleaseCancel(ctx(t), "ns", key, "alice"); err != nil {
		t.Errorf("ReleaseCancel of nothing: %v", err)
	}
	c.Fail("get", "leases", errors.New("down"))
	if _, err := submit.RequestCancel(ctx(t), "ns", key, "", "alice"); err == nil {
		t.Error("RequestCancel with a failing API server")
	}
}

// The notifier finds the executors' Leases with SelectorLeases: every Lease Hold creates
// must match it, and a foreign Lease must not.
func TestSelectorLeasesMatchesHeldLeases(t *testing.T) {
	a, _, c, _ := heartbeats(t)
	if h, err := a.Hold(ctx(t), "ns", storage.Key("web", 1)); h == nil || err != nil {
		t.Fatal(h, err)
	}
	l, err := c.CoordinationV1().Leases("ns").List(ctx(t), metav1.ListOptions{LabelSelector: SelectorLeases})
	if err != nil || len(l.Items) != 1 || l.Items[0].Name != storage.Key("web", 1) {
		t.Fatalf("leases selected: %v, %v", l, err)
	}
	sel, err := labels.Parse(SelectorLeases)
	if err != nil || sel.Matches(labels.Set{"app.kubernetes.io/managed-by": "helm"}) {
		t.Errorf("selector %q: %v", SelectorLeases, err)
	}
}

// The cancel request's patch was formatted with Go's %q, which is not JSON for every
// string: a user name with a control character made the request fail.
func TestCancelRequestByAnyUserName(t *testing.T) {
	a, _, c, clock := heartbeats(t)
	key := storage.Key("web", 1)
	if held, err := a.Hold(ctx(t), "ns", key); err != nil || held == nil {
		t.Fatal(held, err)
	}
	by := "odd\x7fname"
	cancelling := &Heartbeat{Client: c, Holder: "submit", Duration: time.Hour, Clock: clock}
	if running, err := cancelling.RequestCancel(ctx(t), "ns", key, "", by); err != nil || !running {
		t.Fatalf("RequestCancel = %v, %v", running, err)
	}
	if got := lease(t, c).Annotations[AnnotationCancel]; got != by {
		t.Fatalf("cancel annotation %q", got)
	}
}

// With a CancelKey, a cancel is honoured only when submit signed it: anyone who may patch
// Leases in the namespace can write the annotation and its text, not the signature.
func TestOnlyASignedCancelIsHonoured(t *testing.T) {
	a, _, c, clock := heartbeats(t)
	key := storage.Key("web", 1)
	a.CancelKey = []byte("0123456789abcdef0123456789abcdef")
	held, err := a.HoldFor(ctx(t), "ns", key, "req-1")
	if err != nil || held == nil {
		t.Fatal(held, err)
	}
	forged := annotationsPatch(map[string]string{AnnotationCancel: "the platform team (maintenance)",
		AnnotationCancelSignature: "00"})
	if _, err := c.CoordinationV1().Leases("ns").Patch(ctx(t), key, types.MergePatchType, forged, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := held.Sync(ctx(t), AnnotationProgress, "x"); err != nil {
		t.Fatal(err)
	}
	if by := held.CancelledBy(); by != "" {
		t.Fatalf("a Lease writer's unsigned cancel was honoured, by %q", by)
	}
	submit := &Heartbeat{Client: c, Holder: "submit", Duration: time.Hour, Clock: clock, CancelKey: a.CancelKey}
	if running, err := submit.RequestCancel(ctx(t), "ns", key, "req-1", "alice"); err != nil || !running {
		t.Fatalf("RequestCancel = %v, %v", running, err)
	}
	if _, err := held.Sync(ctx(t), AnnotationProgress, "y"); err != nil {
		t.Fatal(err)
	}
	if by := held.CancelledBy(); by != "alice" {
		t.Errorf("submit's signed cancel: CancelledBy %q, want alice", by)
	}
}

// A signed cancel is for one request: copied by a tenant from the Lease of an earlier
// request onto the same-named Lease of a later one (after an uninstall and a new install),
// it is not honoured there.
func TestACancelIsBoundToItsRequest(t *testing.T) {
	a, _, c, clock := heartbeats(t)
	key := storage.Key("web", 1)
	a.CancelKey = []byte("0123456789abcdef0123456789abcdef")
	submit := &Heartbeat{Client: c, Holder: "submit", Duration: time.Hour, Clock: clock, CancelKey: a.CancelKey}
	first, err := a.HoldFor(ctx(t), "ns", key, "req-1")
	if err != nil || first == nil {
		t.Fatal(first, err)
	}
	if running, err := submit.RequestCancel(ctx(t), "ns", key, "req-1", "admin"); err != nil || !running {
		t.Fatalf("RequestCancel = %v, %v", running, err)
	}
	signed := lease(t, c).Annotations
	if err := first.Release(ctx(t)); err != nil {
		t.Fatal(err)
	}
	second, err := a.HoldFor(ctx(t), "ns", key, "req-2")
	if err != nil || second == nil {
		t.Fatal(second, err)
	}
	copied := annotationsPatch(map[string]string{AnnotationCancel: signed[AnnotationCancel],
		AnnotationCancelSignature: signed[AnnotationCancelSignature]})
	if _, err := c.CoordinationV1().Leases("ns").Patch(ctx(t), key, types.MergePatchType, copied, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := second.Sync(ctx(t), AnnotationProgress, "x"); err != nil {
		t.Fatal(err)
	}
	if by := second.CancelledBy(); by != "" {
		t.Errorf("request req-1's signed cancel, copied onto req-2's Lease, was honoured: by %q", by)
	}
}
