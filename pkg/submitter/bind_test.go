package submitter

import (
	"context"
	"errors"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
	"github.com/async-helm/async-helm/pkg/release/lease"
)

// Every accepted request's event goes out bound to its reservation Secret's UID (install,
// upgrade, rollback and the uninstall's mark alike), and the reservation is the only API
// write on the way: the binding is what the executor checks, so a signed event copied onto
// a Secret a tenant made is never run, even if the tenant swapped the reservation before any
// executor saw it. (With submit's old bind, each 201 also created a Lease: 2 writes.)
func TestEveryAcceptedEventIsBoundToItsRecord(t *testing.T) {
	e := newEnv(t)
	bindings := &consumed.Store{Client: e.c, Namespace: "async-helm", Clock: e.svc.Clock}
	e.svc.Bindings = bindings
	ids := []string{"req-install", "req-upgrade", "req-rollback", "req-uninstall"}
	next := 0
	e.svc.NewID = func() string { next++; return ids[next-1] }

	before := len(e.c.Actions())
	acc, err := e.svc.Submit(ctx(t), release.ActionInstall, install("web"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if writes := writesSince(e, before); len(writes) != 1 || writes[0] != "create secrets" {
		t.Errorf("an install's writes on the way to its 201: %v, want only the reservation", writes)
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
	for i, uid := range []types.UID{acc.Secret.UID, up.Secret.UID, back.Secret.UID, marked.UID} {
		got, err := events.BoundSecret(e.sender.sent[i], key)
		if err != nil || got != uid || uid == "" {
			t.Errorf("%s: sent bound to %q (%v), want its record %q", ids[i], got, err, uid)
		}
		if r, err := bindings.Lookup(ctx(t), ids[i]); err != nil || r != nil {
			t.Errorf("%s: submit wrote a consumed record (%+v, %v) for a request it handed over", ids[i], r, err)
		}
	}
}

// writesSince names the API writes the fake cluster saw after the first n actions.
func writesSince(e *env, n int) []string {
	var out []string
	for _, a := range e.c.Actions()[n:] {
		if v := a.GetVerb(); v != "get" && v != "list" && v != "watch" {
			out = append(out, v+" "+a.GetResource().Resource)
		}
	}
	return out
}

// A request whose event cannot be sent is not accepted: the reservation is taken back, and
// the request is bound to it first, so its stored event (which a namespace editor could
// read before the undo) is never run on a Secret made again under that name.
func TestUnsentRequestIsBoundAndTakenBack(t *testing.T) {
	e := newEnv(t)
	bindings := &consumed.Store{Client: e.c, Namespace: "async-helm", Clock: e.svc.Clock}
	e.svc.Bindings = bindings
	e.sender.err = errors.New("broker unreachable")
	_, err := e.svc.Submit(ctx(t), release.ActionInstall, install("web"), nil)
	if !errors.Is(err, ErrNotAccepted) {
		t.Fatalf("err = %v, want ErrNotAccepted", err)
	}
	if n := len(e.secrets()); n != 0 {
		t.Errorf("%d release secrets left", n)
	}
	if r, err := bindings.Lookup(ctx(t), "req-1"); err != nil || r == nil || r.SecretUID == "" {
		t.Errorf("the unsent request is not bound (%+v, %v)", r, err)
	}
}

// When the binding cannot be written either, the reservation is still taken back.
func TestUnsentAndUnboundRequestIsTakenBack(t *testing.T) {
	e := newEnv(t)
	e.svc.Bindings = failingBindings{}
	e.sender.err = errors.New("broker unreachable")
	if _, err := e.svc.Submit(ctx(t), release.ActionInstall, install("web"), nil); !errors.Is(err, ErrNotAccepted) {
		t.Fatalf("err = %v, want ErrNotAccepted", err)
	}
	if n := len(e.secrets()); n != 0 {
		t.Errorf("%d release secrets left", n)
	}
}

// A revision cancelled before any executor ran it is bound to its Secret before it is
// failed: its stored event on a Secret a tenant makes again under the name is refused.
func TestCancelBindsTheQueuedRevision(t *testing.T) {
	e := newEnv(t)
	e.store.SealKey = key // as submit's store seals what it reserves
	bindings := &consumed.Store{Client: e.c, Namespace: "async-helm", Clock: e.svc.Clock}
	e.svc.Bindings = bindings
	e.svc.Heartbeat = &lease.Heartbeat{Client: e.c, Holder: "submit", Duration: time.Hour, Clock: e.svc.Clock}
	acc, err := e.svc.Submit(ctx(t), release.ActionInstall, install("web"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Cancel(ctx(t), "ns", "web", nil); err != nil {
		t.Fatal(err)
	}
	if r, err := bindings.Lookup(ctx(t), "req-1"); err != nil || r == nil || r.SecretUID != acc.Secret.UID {
		t.Errorf("the cancelled request is bound to %+v (%v), want %s", r, err, acc.Secret.UID)
	}
}

// unbound is a sent event as stored in its reservation: without the binding.
func unbound(ev cloudevents.Event) cloudevents.Event {
	c := ev.Clone()
	c.SetExtension(events.ExtSecretUID, nil)
	c.SetExtension(events.ExtBinding, nil)
	return c
}

type failingBindings struct{}

func (failingBindings) Consume(context.Context, consumed.Record) (bool, error) {
	return false, errors.New(`leases.coordination.k8s.io is forbidden`)
}

func (failingBindings) Lookup(context.Context, string) (*consumed.Record, error) {
	return nil, errors.New(`leases.coordination.k8s.io is forbidden`)
}

func (failingBindings) MarkDone(context.Context, string, string) error {
	return errors.New(`leases.coordination.k8s.io is forbidden`)
}

// finish replaces a reservation with the record Helm writes when it is done.
func (e *env) finish(name string, revision int, st helmrelease.Status) {
	e.t.Helper()
	if err := e.c.CoreV1().Secrets("ns").Delete(ctx(e.t), release.SecretName(name, revision), metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.deploy(name, revision, st)
}
