package executor

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/async-helm/async-helm/internal/testwait"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
	"github.com/async-helm/async-helm/pkg/release/lease"
)

func (e *env) secretUID(name string) types.UID {
	e.t.Helper()
	s, err := e.c.CoreV1().Secrets("ns").Get(ctx(e.t), release.SecretName(name, 1), metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return s.UID
}

// A tenant who may write Secrets in the namespace deletes a finished revision, reserves it
// again by hand with the victim's request id (the label is theirs to write) and delivers the
// victim's signed event once more: the request was consumed for the first Secret, so the
// executor refuses it and Helm does not run as the victim.
func TestReplayOntoAnotherSecretIsRefused(t *testing.T) {
	e := newEnv(t, 1)
	a := e.reserve("web", "victim-req")
	if got, err := e.svc.Handle(ctx(t), context.Background(), a, nil); err != nil || got != OutcomeDeployed {
		t.Fatalf("the victim's own run: %s, %v", got, err)
	}
	first := e.secretUID("web")
	if err := e.c.CoreV1().Secrets("ns").Delete(ctx(t), a.SecretName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.reserve("web", "victim-req") // the forged reservation: same name, same request id, another UID
	if e.secretUID("web") == first {
		t.Fatal("the fake cluster reused the UID")
	}
	got, err := e.svc.Handle(ctx(t), context.Background(), a, nil)
	if err != nil || got != OutcomeRefused {
		t.Fatalf("replay: %s, %v; want %s", got, err, OutcomeRefused)
	}
	if n := e.helm.calls.Load(); n != 1 {
		t.Errorf("Helm ran %d times; the replay must not run it", n)
	}
	if st, _ := e.status("web"); st != helmrelease.StatusPendingInstall {
		t.Errorf("the forged record was written: %s", st)
	}
	if e.leaseExists("web") {
		t.Error("the lease was not released")
	}
}

// A redelivery to the same Secret (its executor died after consuming the request) resumes.
func TestRedeliveryToTheSameSecretResumes(t *testing.T) {
	e := newEnv(t, 1)
	a := e.reserve("web", "req-1")
	if first, err := e.consumed.Consume(ctx(t), consumed.Record{RequestID: "req-1", Namespace: "ns", Name: "web",
		Action: "install", Revision: 1, SecretUID: e.secretUID("web")}); err != nil || !first {
		t.Fatal(first, err)
	}
	if got, err := e.svc.Handle(ctx(t), context.Background(), a, nil); err != nil || got != OutcomeDeployed {
		t.Fatalf("resume: %s, %v", got, err)
	}
	rec, err := e.consumed.Lookup(ctx(t), "req-1")
	if err != nil || rec == nil || rec.SecretUID != e.secretUID("web") {
		t.Errorf("consumed record %+v, %v", rec, err)
	}
}

// The first run records the request as consumed, bound to the reservation's UID.
func TestFirstRunConsumesTheRequest(t *testing.T) {
	e := newEnv(t, 1)
	a := e.reserve("web", "req-1")
	if _, err := e.svc.Handle(ctx(t), context.Background(), a, nil); err != nil {
		t.Fatal(err)
	}
	rec, err := e.consumed.Lookup(ctx(t), "req-1")
	if err != nil || rec == nil {
		t.Fatalf("no consumed record: %v", err)
	}
	want := consumed.Record{RequestID: "req-1", Namespace: "ns", Name: "web", Action: "install", Revision: 1,
		SecretUID: e.secretUID("web"), At: rec.At, Outcome: string(OutcomeDeployed)}
	if *rec != want {
		t.Errorf("record %+v, want %+v", *rec, want)
	}
}

// An event whose action is not the one the record is pending for is refused (a tenant
// relabelling a pending upgrade with the request id of an uninstall, say).
func TestEventOfAnotherActionIsRefused(t *testing.T) {
	e := newEnv(t, 1)
	a := e.reserve("web", "req-1")
	a.Action = release.ActionUninstall
	got, err := e.svc.Handle(ctx(t), context.Background(), a, nil)
	if err != nil || got != OutcomeRefused || e.helm.calls.Load() != 0 {
		t.Fatalf("Handle = %s, %v, Helm ran %d times; want refused, no run", got, err, e.helm.calls.Load())
	}
	if rec, _ := e.consumed.Lookup(ctx(t), "req-1"); rec != nil {
		t.Error("a refused event consumed its request")
	}
}

// Every end of an action closes its fence before Helm sees its context end, so that
// nothing Helm writes after the end lands (only the executor's own final write does).
func TestEveryEndFencesBeforeTheCancel(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(e *env, stop context.CancelFunc)
	}{
		{"deadline", func(e *env, _ context.CancelFunc) { e.clock.Add(time.Minute) }}, // MaxActionTime
		{"shutdown", func(_ *env, stop context.CancelFunc) { stop() }},
		{"cancel", func(e *env, _ context.CancelFunc) {
			submit := &lease.Heartbeat{Client: e.c, Holder: "submit", Duration: time.Hour, Clock: e.clock}
			if _, err := submit.RequestCancel(ctx(e.t), "ns", release.LeaseName("web", 1), "req-1", "bob"); err != nil {
				e.t.Error(err)
			}
		}},
		{"lost lease", func(e *env, _ context.CancelFunc) {
			if err := e.c.CoordinationV1().Leases("ns").Delete(ctx(e.t), release.LeaseName("web", 1), metav1.DeleteOptions{}); err != nil {
				e.t.Error(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 1)
			e.svc.ProgressInterval = 5 * time.Millisecond
			if tc.name == "deadline" {
				e.svc.Clock = e.clock // the others end on real progress ticks
			}
			shutdown, stop := context.WithCancel(context.Background())
			defer stop()
			fencedFirst := make(chan bool, 1)
			e.helm.run = func(ctx context.Context, _ helmexec.Request) (*helmrelease.Release, error) {
				tc.end(e, stop)
				<-ctx.Done()
				fencedFirst <- e.helm.fence(0).Ended()
				return nil, ctx.Err()
			}
			a := e.reserve("web", "req-1")
			if got, err := e.svc.Handle(ctx(t), shutdown, a, nil); err != nil || got != OutcomeFailed {
				t.Fatalf("Handle = %s, %v", got, err)
			}
			if !<-fencedFirst {
				t.Error("Helm saw its context end before the fence closed")
			}
		})
	}
}

// While Helm runs, the Lease says which action runs (submit refuses to cancel an uninstall).
func TestRunningActionOnTheLease(t *testing.T) {
	e := newEnv(t, 1)
	var seen string
	e.helm.run = func(ctx context.Context, req helmexec.Request) (*helmrelease.Release, error) {
		l, err := e.c.CoordinationV1().Leases("ns").Get(ctx, release.LeaseName("web", 1), metav1.GetOptions{})
		if err == nil {
			seen = l.Annotations[AnnotationAction]
		}
		return e.writes(ctx, req)
	}
	if _, err := e.svc.Handle(ctx(t), context.Background(), e.reserve("web", "req-1"), nil); err != nil {
		t.Fatal(err)
	}
	if seen != "install" {
		t.Errorf("lease annotation %s = %q, want install", AnnotationAction, seen)
	}
}

// A cancel asked on a running uninstall does not stop it (Helm deletes in one call).
func TestCancelOfARunningUninstallRunsToItsEnd(t *testing.T) {
	e := newEnv(t, 1)
	e.svc.ProgressInterval = 5 * time.Millisecond
	core, logs := observer.New(zap.InfoLevel)
	e.svc.Log = zap.New(core).Sugar()
	e.deployRev("web", 1, helmrelease.StatusDeployed)
	a := e.markUninstall("web", 1, "req-u")
	e.helm.run = func(ctx context.Context, req helmexec.Request) (*helmrelease.Release, error) {
		submit := &lease.Heartbeat{Client: e.c, Holder: "submit", Duration: time.Hour, Clock: e.clock}
		if _, err := submit.RequestCancel(ctx, "ns", release.LeaseName("web", 1), "req-u", "bob"); err != nil {
			return nil, err
		}
		testwait.For(t, func() bool { // the executor saw the cancel and answered it
			return logs.FilterMessageSnippet("cancel requested on a running uninstall").Len() > 0
		})
		if ctx.Err() != nil || e.helm.fence(0).Ended() {
			return nil, errors.New("the uninstall was stopped")
		}
		return e.purge(ctx, req)
	}
	if got, err := e.svc.Handle(ctx(t), context.Background(), a, nil); err != nil || got != OutcomeUninstalled {
		t.Fatalf("Handle = %s, %v", got, err)
	}
}

// A tenant swaps a queued reservation (deletes it, makes its own under the same name with
// the victim's labels) before any executor saw the request. The delivery names the Secret
// submit accepted: it is refused, Helm does not run, and the request is bound to the
// accepted Secret, so the stored copy a sweeper re-sends (no binding) is refused too.
func TestDeliveryBoundToAnotherSecretIsRefused(t *testing.T) {
	e := newEnv(t, 1)
	a := e.reserve("web", "victim-req")
	accepted := e.secretUID("web")
	if err := e.c.CoreV1().Secrets("ns").Delete(ctx(t), a.SecretName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.reserve("web", "victim-req")
	a.BoundSecretUID = accepted
	if got, err := e.svc.Handle(ctx(t), context.Background(), a, nil); err != nil || got != OutcomeRefused {
		t.Fatalf("delivery onto the swapped Secret: %s, %v; want %s", got, err, OutcomeRefused)
	}
	rec, err := e.consumed.Lookup(ctx(t), "victim-req")
	if err != nil || rec == nil || rec.SecretUID != accepted {
		t.Errorf("the request is bound to %+v (%v), want the accepted Secret %s", rec, err, accepted)
	}
	a.BoundSecretUID = "" // the stored copy, re-sent by a sweeper
	if got, err := e.svc.Handle(ctx(t), context.Background(), a, nil); err != nil || got != OutcomeRefused {
		t.Fatalf("re-sent stored copy: %s, %v; want %s", got, err, OutcomeRefused)
	}
	if n := e.helm.calls.Load(); n != 0 {
		t.Errorf("Helm ran %d times on the tenant's Secret", n)
	}
}

// A delivery bound to the Secret it lands on runs.
func TestDeliveryBoundToItsSecretRuns(t *testing.T) {
	e := newEnv(t, 1)
	a := e.reserve("web", "req-1")
	a.BoundSecretUID = e.secretUID("web")
	if got, err := e.svc.Handle(ctx(t), context.Background(), a, nil); err != nil || got != OutcomeDeployed {
		t.Fatalf("%s, %v", got, err)
	}
}

// Where events are signed, a delivery without a binding (a copy of the stored event a
// tenant posts to the executor) is acknowledged and refused before the Lease: nothing runs
// and the record, which may be the genuine one, is left as it is.
func TestUnboundDeliveryIsRefusedWhereBindingIsRequired(t *testing.T) {
	e := newEnv(t, 1)
	e.svc.RequireBinding = true
	a := e.reserve("web", "req-1")
	if got, err := e.svc.Handle(ctx(t), context.Background(), a, nil); err != nil || got != OutcomeRefused {
		t.Fatalf("unbound: %s, %v; want %s", got, err, OutcomeRefused)
	}
	if n := e.helm.calls.Load(); n != 0 || e.leaseExists("web") {
		t.Errorf("Helm ran %d times, lease taken %v", n, e.leaseExists("web"))
	}
	if st, _ := e.status("web"); st != helmrelease.StatusPendingInstall {
		t.Errorf("the record was touched: %s", st)
	}
	a.BoundSecretUID = e.secretUID("web")
	if got, err := e.svc.Handle(ctx(t), context.Background(), a, nil); err != nil || got != OutcomeDeployed {
		t.Fatalf("bound: %s, %v", got, err)
	}
}
