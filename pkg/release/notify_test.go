package release

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	if err := s.MarkNotified(ctx(t), got); err != nil {
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
