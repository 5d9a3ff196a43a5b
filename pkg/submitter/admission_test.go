package submitter

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/release"
)

// forge writes what a namespace editor can: a Secret with every label of a queued
// reservation of ours (no seal: only async-helm has the key).
func (e *env) forge(name string) {
	e.t.Helper()
	l := map[string]string{release.LabelOwner: release.OwnerHelm, release.LabelName: name, release.LabelStatus: "pending-install",
		release.LabelVersion: "1", release.LabelRevision: "1", release.LabelQueued: "true", release.LabelRequestID: "r"}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: release.SecretName(name, 1), Namespace: "ns", Labels: l}, Type: release.SecretType}
	if _, err := e.c.CoreV1().Secrets("ns").Create(ctx(e.t), sec, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// submit's 429 counts only what submit sealed: hand-made Secrets with the queued labels
// fill nobody's bound, reservations do. The index gets EVENT_SIGNING_KEY as submit's Start
// gives it; without the key (how submit counted before) the forged ones made it 429.
func TestAdmissionCountsOnlySubmitsOwnReservations(t *testing.T) {
	for _, sealed := range []bool{true, false} {
		e := newEnv(t)
		opts := release.IndexOptions{}
		if sealed {
			opts.SealKey, e.store.SealKey = key, key
		}
		idx, err := release.NewRevisionIndexWith(e.c.Metadata(), opts)
		if err != nil {
			t.Fatal(err)
		}
		runCtx, stop := context.WithCancel(ctx(t))
		defer stop()
		if err := idx.Run(runCtx); err != nil {
			t.Fatal(err)
		}
		e.store.Revisions = idx
		e.svc.MaxQueuedPerNamespace = 2
		for _, n := range []string{"f1", "f2", "f3"} {
			e.forge(n)
		}
		waitQueued(t, idx, map[bool]int{true: 0, false: 3}[sealed])
		_, err = e.svc.Submit(ctx(t), release.ActionInstall, install("a"), nil)
		if !sealed {
			if !errors.Is(err, ErrBusy) {
				t.Errorf("without the seal key, 3 forged Secrets: %v, want 429 (the attack the key stops)", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("3 forged Secrets refused a real install: %v", err)
		}
		if _, err := e.svc.Submit(ctx(t), release.ActionInstall, install("b"), nil); err != nil {
			t.Fatal(err)
		}
		waitQueued(t, idx, 2)
		if _, err := e.svc.Submit(ctx(t), release.ActionInstall, install("c"), nil); !errors.Is(err, ErrBusy) {
			t.Errorf("2 sealed reservations at a bound of 2: %v, want 429", err)
		}
	}
}

// waitQueued waits until the informer-fed count of namespace ns reaches n.
func waitQueued(t *testing.T, idx *release.RevisionIndex, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, _ := idx.QueuedCount("ns")
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queued in ns: %d, want %d", got, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
