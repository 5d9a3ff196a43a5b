package executor

// A reservation whose payload a namespace editor rewrote final (deployed) before any
// executor started it is no duplicate: Helm's adoption drops the queued label, so a final
// record that keeps it was never run. Acknowledged as a duplicate, its valid seal would
// hold a MAX_QUEUED slot for ever (the sweeper reads only records labelled pending).

import (
	"context"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/release"
)

func TestFinalPayloadStillQueuedIsRefusedAndUnqueued(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	e := newEnv(t, 1)
	e.store.SealKey, e.svc.SealKey = key, key
	a := e.reserve("web", "req-1")
	e.rewriteStatus(helmrelease.StatusDeployed)
	got, err := e.svc.Handle(ctx(t), context.Background(), a, nil)
	if err != nil || got != OutcomeRefused {
		t.Errorf("Handle = %q, %v; want refused", got, err)
	}
	m, err := e.c.Metadata().Resource(release.SecretsResource).Namespace("ns").Get(ctx(t), release.SecretName("web", 1), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if release.CountsAsQueued(key, m) {
		t.Fatalf("a reservation whose payload was rewritten final still counts toward MAX_QUEUED: %v", m.GetLabels())
	}
	if n := e.helm.calls.Load(); n != 0 {
		t.Errorf("Helm ran %d times", n)
	}
	// A genuine redelivery after the end (no queued label) is a duplicate.
	if got, err := e.svc.Handle(ctx(t), context.Background(), a, nil); err != nil || got != OutcomeDuplicate {
		t.Errorf("redelivery = %q, %v; want duplicate", got, err)
	}
}
