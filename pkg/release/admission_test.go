package release

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var sealKey = []byte("0123456789abcdef0123456789abcdef")

// forgeQueued writes what a namespace editor can: a Secret with every label of a queued
// reservation of ours, and optionally a seal copied from another revision.
func forgeQueued(t *testing.T, s *Store, ns, name, seal string) {
	t.Helper()
	l := map[string]string{LabelOwner: OwnerHelm, LabelName: name, LabelStatus: "pending-install",
		LabelVersion: "1", LabelRevision: "1", LabelQueued: "true", LabelRequestID: "r"}
	if seal != "" {
		l[LabelSeal] = seal
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: SecretName(name, 1), Namespace: ns, Labels: l}, Type: SecretType}
	if _, err := s.Client.CoreV1().Secrets(ns).Create(ctx(t), sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A reservation carries the seal of its own namespace, Secret and request id: a copy on
// another Secret does not verify.
func TestReservationIsSealed(t *testing.T) {
	s, c, _ := newStore(t)
	s.SealKey = sealKey
	reserve(t, s, "a", ActionInstall, "req-a")
	real, err := c.CoreV1().Secrets("ns").Get(ctx(t), SecretName("a", 1), metav1.GetOptions{})
	if err != nil || !Sealed(sealKey, real) || real.Labels[LabelSeal] != Seal(sealKey, "ns", SecretName("a", 1), "req-a") {
		t.Fatalf("the reservation is not sealed: %v %v", real.Labels, err)
	}
	copied := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: SecretName("b", 1), Namespace: "ns", Labels: real.Labels}}
	if Sealed(sealKey, copied) {
		t.Error("a seal copied onto another Secret verifies")
	}
}

func TestUninstallMarkIsSealed(t *testing.T) {
	s, c, _ := newStore(t)
	s.SealKey = sealKey
	reserve(t, s, "a", ActionInstall, "req-a")
	finish(t, c, "a", 1, "deployed")
	if _, err := s.MarkUninstalling(ctx(t), UninstallMark{Namespace: "ns", Name: "a", Revision: 1, RequestID: "req-u"}); err != nil {
		t.Fatal(err)
	}
	m, err := c.CoreV1().Secrets("ns").Get(ctx(t), SecretName("a", 1), metav1.GetOptions{})
	if err != nil || !Sealed(sealKey, m) || m.Labels[LabelQueued] != "true" {
		t.Fatalf("uninstall mark: %v %v", m.Labels, err)
	}
}

// running starts the index it is given (until the test ends) and waits for its sync.
func running(t *testing.T) func(*RevisionIndex, error) *RevisionIndex {
	return func(x *RevisionIndex, err error) *RevisionIndex {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		runCtx, stop := context.WithCancel(ctx(t))
		t.Cleanup(stop)
		if err := x.Run(runCtx); err != nil {
			t.Fatal(err)
		}
		return x
	}
}
