package executor

import (
	"context"
	"errors"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/helmexec"
)

// Helm's final write landed and then an error came back (a lost answer under load): the
// record is deployed, so the request's outcome is deployed, not the error's failed.
func TestAnErrorAfterTheRecordIsDeployedKeepsItsOutcome(t *testing.T) {
	e := newEnv(t, 2)
	e.helm.run = func(ctx context.Context, req helmexec.Request) (*helmrelease.Release, error) {
		if _, err := e.writes(ctx, req); err != nil {
			return nil, err
		}
		return nil, errors.New("http2: client connection lost")
	}
	a := e.reserve("web", "req-1")
	if got, err := e.svc.Handle(ctx(t), context.Background(), a, nil); err != nil || got != OutcomeDeployed {
		t.Fatalf("Handle = %s, %v; want deployed", got, err)
	}
	if st, _ := e.status("web"); st != helmrelease.StatusDeployed {
		t.Errorf("revision %s, want deployed", st)
	}
	rec, err := e.consumed.Lookup(ctx(t), "req-1")
	if err != nil || rec == nil || rec.Outcome != string(OutcomeDeployed) {
		t.Errorf("consumed record %+v, %v; want outcome deployed", rec, err)
	}
}
