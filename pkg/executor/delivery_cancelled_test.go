package executor

import (
	"context"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
	"github.com/async-helm/async-helm/pkg/release/lease"
)

// Attack by a namespace editor on a request its caller cancelled before any executor ran it:
// submit bound the request to its Secret (a consumed record, outcome "cancelled") and failed the
// revision. The editor rewrites the failed record in place (same UID) back to pending-install
// and puts the stored event back; the sweeper binds it to this Secret (created right after
// the request was signed) and re-sends it. The request is consumed for this very Secret and
// has no outcome, so the executor resumes it: a cancelled request runs, as its caller.
func TestCancelledRequestRewoundIsNotRun(t *testing.T) {
	e := newEnv(t, 1)
	e.svc.RequireBinding = true
	a := e.reserve("web", "victim-req")
	uid := e.secretUID("web")
	// submit's cancel of the queued revision: bind, then fail it.
	if _, err := e.consumed.Consume(ctx(t), consumed.Record{RequestID: "victim-req", Namespace: "ns", Name: "web",
		Action: "install", Revision: 1, SecretUID: uid, Outcome: consumed.OutcomeCancelled}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.MarkFailed(ctx(t), "ns", "web", 1, `Release "web" failed: cancelled by alice before an executor ran it`, release.ReplaceFailed); err != nil {
		t.Fatal(err)
	}
	e.rewindToPending(helmrelease.StatusPendingInstall)
	a.BoundSecretUID = uid // the sweeper's re-send, bound to this Secret
	got, err := e.svc.Handle(ctx(t), context.Background(), a, nil)
	if n := e.helm.calls.Load(); n != 0 {
		t.Errorf("the cancelled request ran (Handle = %s, %v): Helm ran %d time(s)", got, err, n)
	}
}

// The same after the executor's own cancel path: a cancel was asked while the revision's
// executor was lost; the next executor fails it unrun (admit) and deletes the Lease, cancel
// and all, without recording an outcome. Rewound in place and re-sent bound, it must not run.
func TestCancelledByTheExecutorRewoundIsNotRun(t *testing.T) {
	e := newEnv(t, 1)
	e.svc.RequireBinding = true
	a := e.reserve("web", "victim-req")
	a.BoundSecretUID = e.secretUID("web")
	dead := &lease.Heartbeat{Client: e.c, Holder: "dead-pod", Duration: time.Second, Clock: e.clock}
	if h, err := dead.Hold(ctx(t), "ns", release.LeaseName("web", 1)); h == nil || err != nil {
		t.Fatal(h, err)
	}
	submit := &lease.Heartbeat{Client: e.c, Holder: "submit", Duration: time.Hour, Clock: e.clock}
	if running, err := submit.RequestCancel(ctx(t), "ns", release.LeaseName("web", 1), "victim-req", "alice"); err != nil || !running {
		t.Fatal(running, err)
	}
	e.clock.Add(time.Minute) // the dead pod's Lease lapses
	if got, err := e.svc.Handle(ctx(t), context.Background(), a, nil); err != nil || got != OutcomeFailed {
		t.Fatalf("the cancelled revision: %s, %v", got, err)
	}
	e.rewindToPending(helmrelease.StatusPendingInstall)
	got, err := e.svc.Handle(ctx(t), context.Background(), a, nil)
	if n := e.helm.calls.Load(); n != 0 {
		t.Errorf("the cancelled request ran (Handle = %s, %v): Helm ran %d time(s)", got, err, n)
	}
}
