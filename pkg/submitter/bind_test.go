package submitter

import (
	"context"
	"errors"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
)

// Every accepted request is bound to its reservation Secret's UID before its event goes
// out: install, upgrade, rollback and the uninstall's mark alike. The binding is what the
// executor checks, so a signed event copied onto a Secret a tenant made is never run,
// even if the tenant swapped the reservation before any executor saw it.
func TestEveryAcceptedRequestIsBoundToItsRecord(t *testing.T) {
	e := newEnv(t)
	bindings := &consumed.Store{Client: e.c, Namespace: "async-helm", Now: e.svc.Now}
	e.svc.Bindings = bindings
	ids := []string{"req-install", "req-upgrade", "req-rollback", "req-uninstall"}
	next := 0
	e.svc.NewID = func() string { next++; return ids[next-1] }

	acc, err := e.svc.Submit(ctx(t), release.ActionInstall, install("web"), nil)
	if err != nil {
		t.Fatal(err)
	}
	e.finish("web", 1, helmrelease.StatusDeployed)
	up, err := e.svc.Submit(ctx(t), release.ActionUpgrade, install("web"), nil)
	if err != nil {
		t.Fatal(err)
	}
	e.finish("web", 2, helmrelease.StatusDeployed)
	back, err := e.svc.Rollback(ctx(t), api.RollbackRequest{Name: "web", Namespace: "ns", Version: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.finish("web", 3, helmrelease.StatusDeployed)
	if _, err := e.svc.Uninstall(ctx(t), "ns", "web", "", nil); err != nil {
		t.Fatal(err)
	}
	marked, err := e.c.CoreV1().Secrets("ns").Get(ctx(t), release.SecretName("web", 3), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct {
		revision int
		uid      string
	}{{1, string(acc.Secret.UID)}, {2, string(up.Secret.UID)}, {3, string(back.Secret.UID)}, {3, string(marked.UID)}} {
		r, err := bindings.Lookup(ctx(t), ids[i])
		if err != nil {
			t.Fatal(err)
		}
		if r == nil {
			t.Fatalf("%s: not bound to its record", ids[i])
		}
		if string(r.SecretUID) != want.uid || r.Revision != want.revision || r.Namespace != "ns" || r.Name != "web" {
			t.Errorf("%s bound to %+v, want revision %d uid %s", ids[i], r, want.revision, want.uid)
		}
	}
}

// A request that cannot be bound is not accepted: nothing stays reserved, no event is sent.
func TestUnboundRequestIsTakenBack(t *testing.T) {
	e := newEnv(t)
	e.svc.Bindings = failingBindings{}
	_, err := e.svc.Submit(ctx(t), release.ActionInstall, install("web"), nil)
	if !errors.Is(err, ErrNotAccepted) {
		t.Fatalf("err = %v, want ErrNotAccepted", err)
	}
	if n := len(e.secrets()); n != 0 {
		t.Errorf("%d release secrets left", n)
	}
	if n := len(e.sender.sent); n != 0 {
		t.Errorf("%d events sent for a request that was not bound", n)
	}
}

type failingBindings struct{}

func (failingBindings) Consume(context.Context, consumed.Record) (bool, error) {
	return false, errors.New(`leases.coordination.k8s.io is forbidden`)
}

// finish replaces a reservation with the record Helm writes when it is done.
func (e *env) finish(name string, revision int, st helmrelease.Status) {
	e.t.Helper()
	if err := e.c.CoreV1().Secrets("ns").Delete(ctx(e.t), release.SecretName(name, revision), metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.deploy(name, revision, st)
}
