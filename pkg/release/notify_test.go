package release

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/release/lease"
)

func TestNotifierDoorPatchesAsCompareAndSwap(t *testing.T) {
	s, c, clock := newStore(t)
	reserve(t, s, "web", ActionInstall, "req-web")
	revs, err := s.PendingRevisions(ctx(t), "ns")
	if err != nil || len(revs) != 1 || !revs[0].Ours || revs[0].UID == "" {
		t.Fatalf("PendingRevisions: %+v %v", revs, err)
	}
	rev := revs[0]
	if ok, err := s.ClaimRedrive(ctx(t), rev, clock.Now()); !ok || err != nil {
		t.Fatalf("claim: %v %v", ok, err)
	}
	// The same view again: the claim is a compare-and-swap, so a second one loses.
	if ok, err := s.ClaimRedrive(ctx(t), rev, clock.Now()); ok || err != nil {
		t.Fatalf("stale claim: %v %v", ok, err)
	}
	if ok, err := s.MarkDeadLettered(ctx(t), "ns", rev.SecretName, "req-other", clock.Now()); ok || err != nil {
		t.Fatalf("dead letter of another request: %v %v", ok, err)
	}
	if ok, err := s.MarkDeadLettered(ctx(t), "ns", rev.SecretName, "req-web", clock.Now()); !ok || err != nil {
		t.Fatalf("dead letter: %v %v", ok, err)
	}
	m, err := s.ReleaseMeta(ctx(t), "ns", rev.SecretName)
	if err != nil || m == nil {
		t.Fatal(m, err)
	}
	got, _ := RevisionFromMeta(m)
	if got.Sent != 1 || !got.SentAt.Equal(clock.Now()) || !got.DeadLettered {
		t.Fatalf("after claim and dead letter: %+v", got)
	}
	if err := s.MarkNotified(ctx(t), got, ""); err != nil {
		t.Fatal(err)
	}
	if m, _ := s.ReleaseMeta(ctx(t), "ns", rev.SecretName); m.Annotations[AnnotationNotified] != "pending-install" {
		t.Fatalf("notified: %v", m.Annotations)
	}
	if m, err := s.ReleaseMeta(ctx(t), "ns", "nothing"); m != nil || err != nil {
		t.Fatalf("missing: %v %v", m, err)
	}
	if err := c.CoreV1().Secrets("ns").Delete(ctx(t), rev.SecretName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.MarkDeadLettered(ctx(t), "ns", rev.SecretName, "req-web", clock.Now().Add(time.Minute)); ok || err != nil {
		t.Fatalf("dead letter of a gone revision: %v %v", ok, err)
	}
}

func TestSecretPatchEscapesAndDeletes(t *testing.T) {
	b, err := secretPatch{ResourceVersion: "7", Labels: map[string]*string{"a": nil},
		Annotations: map[string]*string{"r": ptr(`"}},"x":{"`)}}.MarshalJSON()
	want := `{"metadata":{"annotations":{"r":"\"}},\"x\":{\""},"labels":{"a":null},"resourceVersion":"7"}}`
	if err != nil || string(b) != want {
		t.Fatalf("%s %v", b, err)
	}
}

func TestTombstonesAndSignsOfLifeThroughTheStore(t *testing.T) {
	s, c, clock := newStore(t)
	reserve(t, s, "web", ActionInstall, "req-web")
	rev := func() Revision {
		revs, err := s.PendingRevisions(ctx(t), "ns")
		if err != nil || len(revs) != 1 {
			t.Fatal(revs, err)
		}
		return revs[0]
	}()
	if since, alive, err := s.LastSignOfLife(ctx(t), rev); alive || err != nil || !since.Equal(rev.Created) {
		t.Fatalf("no lease: %v %v %v", since, alive, err)
	}
	hb := &lease.Heartbeat{Client: c, Holder: "executor", Duration: 30 * time.Second, Clock: clock}
	if held, err := hb.Hold(ctx(t), "ns", LeaseName("web", 1)); held == nil || err != nil {
		t.Fatal(held, err)
	}
	if _, alive, err := s.LastSignOfLife(ctx(t), rev); !alive || err != nil {
		t.Fatalf("held lease: %v %v", alive, err)
	}
	if alive, err := s.Alive(ctx(t), "ns", LeaseName("web", 1)); !alive || err != nil {
		t.Fatalf("Alive: %v %v", alive, err)
	}
	clock.Add(time.Minute)
	if since, alive, err := s.LastSignOfLife(ctx(t), rev); alive || err != nil || !since.Equal(clock.Now().Add(-30*time.Second)) {
		t.Fatalf("expired lease: %v %v %v", since, alive, err)
	}
	grave, err := s.DigTombstone(ctx(t), lease.Tombstone{Namespace: "ns", Name: "web", Revision: 1, RequestID: "req-u"})
	if err != nil {
		t.Fatal(err)
	}
	graves, _, err := s.TombstonePage(ctx(t), "ns", "")
	if err != nil || len(graves) != 1 || graves[0].Lease() != grave.Lease() || graves[0].LeaseUID() == "" || !graves[0].WellNamed() {
		t.Fatalf("Tombstones: %+v %v", graves, err)
	}
	if got, err := s.ReadTombstone(ctx(t), "ns", LeaseName("web", 1)); got != nil || err != nil {
		t.Fatalf("a heartbeat is not a tombstone: %+v %v", got, err)
	}
	got, err := s.ReadTombstone(ctx(t), "ns", grave.Lease())
	if err != nil || got == nil || got.SecretUID != string(rev.UID) {
		t.Fatalf("ReadTombstone: %+v %v", got, err)
	}
	if err := s.BuryTombstone(ctx(t), *got); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ReadTombstone(ctx(t), "ns", grave.Lease()); got != nil || err != nil {
		t.Fatalf("buried: %+v %v", got, err)
	}
}
