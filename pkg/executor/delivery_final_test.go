package executor

import (
	"context"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"
)

// A reservation whose payload a namespace editor rewrote final (deployed) before any
// executor started it is acknowledged as a duplicate and never run: the ledger, not the
// record's queued label, holds its place in admission.
func TestFinalPayloadStillQueuedIsNotRun(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	e := newEnv(t, 1)
	e.store.SealKey, e.svc.SealKey = key, key
	a := e.reserve("web", "req-1")
	e.rewriteStatus(helmrelease.StatusDeployed)
	got, err := e.svc.Handle(ctx(t), context.Background(), a, nil)
	if err != nil || got != OutcomeDuplicate {
		t.Errorf("Handle = %q, %v; want duplicate", got, err)
	}
	if n := e.helm.calls.Load(); n != 0 {
		t.Errorf("Helm ran %d times", n)
	}
}
