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

// A request whose reservation was rewritten final before it was consumed is bound to the
// Secret it was accepted for, with an outcome: it can never run, so its ledger entry ends
// now rather than at its TTL. A redelivery of a request that ran keeps its outcome.
func TestRewrittenFinalReservationIsConsumed(t *testing.T) {
	e := newEnv(t, 1)
	a := e.reserve("web", "req-1")
	a.BoundSecretUID = e.secretUID("web")
	e.rewriteStatus(helmrelease.StatusDeployed)
	if got, err := e.svc.Handle(ctx(t), context.Background(), a, nil); err != nil || got != OutcomeDuplicate {
		t.Fatalf("Handle = %q, %v; want duplicate", got, err)
	}
	rec, err := e.consumed.Lookup(ctx(t), "req-1")
	if err != nil || rec == nil || rec.SecretUID != a.BoundSecretUID || rec.Outcome != outcomeRewritten {
		t.Errorf("consumed record %+v, %v; want bound to %s with outcome %q", rec, err, a.BoundSecretUID, outcomeRewritten)
	}

	ran := newEnv(t, 1)
	b := ran.reserve("web", "req-2")
	b.BoundSecretUID = ran.secretUID("web")
	for i, want := range []Outcome{OutcomeDeployed, OutcomeDuplicate} {
		if got, err := ran.svc.Handle(ctx(t), context.Background(), b, nil); err != nil || got != want {
			t.Fatalf("delivery %d = %q, %v; want %q", i+1, got, err, want)
		}
	}
	if rec, err := ran.consumed.Lookup(ctx(t), "req-2"); err != nil || rec == nil || rec.Outcome != string(OutcomeDeployed) {
		t.Errorf("consumed record of the run request %+v, %v; want outcome deployed", rec, err)
	}
}
