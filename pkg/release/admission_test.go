package release

import (
	"context"
	"fmt"
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

// Any Secret with the queued labels counted toward MAX_QUEUED: 2,000 hand-made ones made
// every tenant's request a 429. Only revisions async-helm sealed count now.
func TestAdmissionCountsOnlySealedRevisions(t *testing.T) {
	s, c, _ := newStore(t)
	s.SealKey = sealKey
	reserve(t, s, "a", ActionInstall, "req-a")
	reserve(t, s, "b", ActionInstall, "req-b")
	real, err := c.CoreV1().Secrets("ns").Get(ctx(t), SecretName("a", 1), metav1.GetOptions{})
	if err != nil || real.Labels[LabelSeal] == "" {
		t.Fatalf("the reservation is not sealed: %v %v", real.Labels, err)
	}
	for i := 0; i < 40; i++ {
		forgeQueued(t, s, fmt.Sprintf("ns%d", i%2), fmt.Sprintf("fake%d", i), "")
	}
	forgeQueued(t, s, "ns", "copied", real.Labels[LabelSeal]) // a seal is bound to its Secret
	x := running(t)(NewRevisionIndexWith(c.Metadata(), IndexOptions{SealKey: sealKey}))
	s.Revisions = x
	if inNS, total := queuedIn(x, "ns"); inNS != 2 || total != 2 {
		t.Fatalf("queued = %d, %d; want 2, 2 (the hand-made ones count for nothing)", inNS, total)
	}
	if keys, _ := x.ByIndex(QueuedIndex, queuedAll); len(keys) != 2 {
		t.Fatalf("queued index holds %d", len(keys))
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
	if err != nil || !Sealed(sealKey, m) || !(queuedRule{sealKey: sealKey}).queued(m) {
		t.Fatalf("uninstall mark: %v %v", m.Labels, err)
	}
}

// running starts the index it is given (until the test ends) and waits for its sync.
// queuedIn is what the index holds as queued in ns and in all (the notifier's metrics).
func queuedIn(x *RevisionIndex, ns string) (inNamespace, total int) {
	in, _ := x.ByIndex(QueuedIndex, ns)
	all, _ := x.ByIndex(QueuedIndex, queuedAll)
	return len(in), len(all)
}

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
