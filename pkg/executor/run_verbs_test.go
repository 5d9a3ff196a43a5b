package executor

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/lease"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

// deployRev writes revision v of name as Helm would.
func (e *env) deployRev(name string, v int, st helmrelease.Status) {
	e.t.Helper()
	rel := &helmrelease.Release{Name: name, Namespace: "ns", Version: v,
		Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "tiny", Version: "1.0.0"},
			Templates: []*chart.File{{Name: "templates/cm.yaml", Data: []byte("kind: ConfigMap")}}},
		Config: map[string]any{"v": v}, Info: &helmrelease.Info{Status: st}}
	if err := storage.NewSecrets(e.c.CoreV1().Secrets("ns")).Create(release.SecretName(name, v), rel); err != nil {
		e.t.Fatal(err)
	}
}

// markUninstall marks the latest revision of name as submit does and returns the event's payload.
func (e *env) markUninstall(name string, rev int, id string) events.Action {
	e.t.Helper()
	if _, err := e.store.MarkUninstalling(ctx(e.t), release.UninstallMark{Namespace: "ns", Name: name, Revision: rev, RequestID: id}); err != nil {
		e.t.Fatal(err)
	}
	return events.Action{Action: release.ActionUninstall, Namespace: "ns", Name: name, Revision: rev,
		SecretName: release.SecretName(name, rev), RequestID: id, Options: events.Options{Timeout: time.Minute}}
}

// purge is a fake Helm uninstall: every record of the release goes.
func (e *env) purge(ctx context.Context, req helmexec.Request) (*helmrelease.Release, error) {
	l, err := e.c.CoreV1().Secrets("ns").List(ctx, metav1.ListOptions{LabelSelector: release.SelectorRelease(req.Name)})
	if err != nil {
		return nil, err
	}
	for _, s := range l.Items {
		if err := e.c.CoreV1().Secrets("ns").Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil {
			return nil, err
		}
	}
	return &helmrelease.Release{Name: req.Name, Version: req.Revision, Info: &helmrelease.Info{Status: helmrelease.StatusUninstalled}}, nil
}

// A redelivered uninstall event runs Helm once: the redelivery finds the records gone.
func TestUninstallRunsOnce(t *testing.T) {
	e := newEnv(t, 2)
	e.helm.run = e.purge
	e.deployRev("web", 1, helmrelease.StatusSuperseded)
	e.deployRev("web", 2, helmrelease.StatusDeployed)
	a := e.markUninstall("web", 2, "req-u")
	var observed string
	e.svc.Observe = func(action, outcome string, _ time.Duration) { observed = action + "/" + outcome }
	got, err := e.svc.Handle(ctx(t), context.Background(), a, nil)
	if err != nil || got != OutcomeUninstalled {
		t.Fatalf("Handle = %s, %v", got, err)
	}
	if observed != "uninstall/uninstalled" {
		t.Errorf("observed %q", observed)
	}
	if e.helm.reqs[0].Revision != 2 || e.helm.reqs[0].Timeout != time.Minute {
		t.Errorf("Helm asked %+v", e.helm.reqs[0])
	}
	if _, err := e.c.CoordinationV1().Leases("ns").Get(ctx(t), release.LeaseName("web", 2), metav1.GetOptions{}); err == nil {
		t.Error("the heartbeat Lease stayed")
	}
	// The tombstone stays for the notifier: done, naming the request, the chart and the
	// Secret it deleted.
	l, err := e.c.CoordinationV1().Leases("ns").Get(ctx(t), lease.TombstoneName("web", 2, "req-u"), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("no tombstone: %v", err)
	}
	if ts, ok := lease.TombstoneFrom(l); !ok || !ts.Done || ts.Name != "web" || ts.Revision != 2 || ts.RequestID != "req-u" || ts.Chart != "tiny-1.0.0" || ts.SecretUID == "" {
		t.Errorf("tombstone %+v (%v)", ts, ok)
	}
	got, err = e.svc.Handle(ctx(t), context.Background(), a, nil)
	if err != nil || got != OutcomeGone || e.helm.calls.Load() != 1 {
		t.Errorf("redelivery = %s, %v; Helm ran %d times", got, err, e.helm.calls.Load())
	}
}

// An uninstall that fails is recorded failed with the reason (not left uninstalling).
func TestUninstallFailureIsRecorded(t *testing.T) {
	e := newEnv(t, 2)
	e.helm.run = func(context.Context, helmexec.Request) (*helmrelease.Release, error) {
		return nil, errors.New("pre-delete hook failed")
	}
	e.deployRev("web", 1, helmrelease.StatusDeployed)
	a := e.markUninstall("web", 1, "req-u")
	if got, err := e.svc.Handle(ctx(t), context.Background(), a, nil); err != nil || got != OutcomeFailed {
		t.Fatalf("Handle = %s, %v", got, err)
	}
	st, desc := e.status("web")
	if st != helmrelease.StatusFailed || !strings.Contains(desc, "pre-delete hook failed") {
		t.Errorf("revision %s %q", st, desc)
	}
	if l, err := e.c.CoordinationV1().Leases("ns").List(ctx(t), metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
		t.Errorf("a failed uninstall left Leases (its heartbeat, its tombstone): %v, %v", l, err)
	}
	sec, _ := e.c.CoreV1().Secrets("ns").Get(ctx(t), release.SecretName("web", 1), metav1.GetOptions{})
	if sec.Labels[release.LabelQueued] != "" {
		t.Errorf("failed revision still queued: %v", sec.Labels)
	}
	// A redelivery finds it final: Helm does not run again.
	if got, _ := e.svc.Handle(ctx(t), context.Background(), a, nil); got != OutcomeDuplicate || e.helm.calls.Load() != 1 {
		t.Errorf("redelivery %s, Helm ran %d times", got, e.helm.calls.Load())
	}
}

// An upgrade reserved in the same instant as the mark wins: the uninstall is failed, never run.
func TestUninstallOfAnOlderRevisionIsRefused(t *testing.T) {
	e := newEnv(t, 2)
	e.deployRev("web", 1, helmrelease.StatusDeployed)
	a := e.markUninstall("web", 1, "req-u")
	if _, err := e.store.Reserve(ctx(t), release.Reservation{Namespace: "ns", Name: "web", Action: release.ActionUpgrade,
		Revision: 2, Chart: &chart.Metadata{Name: "tiny", Version: "1.0.0"}, RequestID: "req-up"}); err != nil {
		t.Fatal(err)
	}
	if got, err := e.svc.Handle(ctx(t), context.Background(), a, nil); err != nil || got != OutcomeFailed {
		t.Fatalf("Handle = %s, %v", got, err)
	}
	if e.helm.calls.Load() != 0 {
		t.Error("Helm ran the uninstall")
	}
	if st, desc := e.status("web"); st != helmrelease.StatusFailed || !strings.Contains(desc, "revision 2 (pending-upgrade) was reserved") {
		t.Errorf("revision 1 %s %q", st, desc)
	}
}

// A rollback is run once with the target and this request's labels; a redelivery finds it deployed.
func TestRollbackRunsOnce(t *testing.T) {
	e := newEnv(t, 2)
	e.deployRev("web", 1, helmrelease.StatusSuperseded)
	e.deployRev("web", 2, helmrelease.StatusDeployed)
	if _, err := e.store.Reserve(ctx(t), release.Reservation{Namespace: "ns", Name: "web", Action: release.ActionRollback,
		Revision: 3, Chart: &chart.Metadata{Name: "tiny", Version: "1.0.0"}, RequestID: "req-r"}); err != nil {
		t.Fatal(err)
	}
	e.helm.run = func(ctx context.Context, req helmexec.Request) (*helmrelease.Release, error) {
		d := storage.NewSecrets(e.c.CoreV1().Secrets("ns"))
		rel, err := d.Get(release.SecretName(req.Name, req.Revision))
		if err != nil {
			return nil, err
		}
		// Helm's rollback writes the record with the request's labels only: queued is gone.
		rel.Info.Status, rel.Labels = helmrelease.StatusDeployed, req.Labels
		return rel, d.Update(release.SecretName(req.Name, req.Revision), rel)
	}
	a := events.Action{Action: release.ActionRollback, Namespace: "ns", Name: "web", Revision: 3, RollbackTo: 1,
		SecretName: release.SecretName("web", 3), RequestID: "req-r", Options: events.Options{Timeout: time.Minute}}
	if got, err := e.svc.Handle(ctx(t), context.Background(), a, nil); err != nil || got != OutcomeDeployed {
		t.Fatalf("Handle = %s, %v", got, err)
	}
	req := e.helm.reqs[0]
	if req.RollbackTo != 1 || req.Revision != 3 || req.Labels[release.LabelRequestID] != "req-r" || req.Labels[release.LabelRevision] != "3" {
		t.Errorf("Helm asked %+v", req)
	}
	if got, _ := e.svc.Handle(ctx(t), context.Background(), a, nil); got != OutcomeDuplicate || e.helm.calls.Load() != 1 {
		t.Errorf("redelivery %s, Helm ran %d times", got, e.helm.calls.Load())
	}
}

// An uninstall cancelled while its executor was lost is failed without Helm, and leaves
// no tombstone: there is nothing "uninstalled" to report.
func TestUninstallCancelledBeforeTheRunLeavesNoTombstone(t *testing.T) {
	e := newEnv(t, 1)
	e.deployRev("web", 1, helmrelease.StatusDeployed)
	a := e.markUninstall("web", 1, "req-u")
	dead := &lease.Heartbeat{Client: e.c, Holder: "dead", Duration: time.Minute, Clock: e.clock}
	if h, err := dead.Hold(ctx(t), "ns", release.LeaseName("web", 1)); h == nil || err != nil {
		t.Fatal(h, err)
	}
	if _, err := dead.RequestCancel(ctx(t), "ns", release.LeaseName("web", 1), "req-u", "alice"); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(2 * time.Minute)
	if o, err := e.svc.Handle(ctx(t), context.Background(), a, nil); err != nil || o != OutcomeFailed || e.helm.calls.Load() != 0 {
		t.Fatalf("Handle = %q, %v; Helm ran %d times", o, err, e.helm.calls.Load())
	}
	if l, err := e.c.CoordinationV1().Leases("ns").List(ctx(t), metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
		t.Errorf("Leases left: %v, %v", l, err)
	}
}

// A delivery whose reservation was deleted binds its request to the Secret it was accepted
// for, with the outcome gone: the request can never run, and the ledger entry it holds
// clears with the consumed record instead of counting until its TTL.
func TestGoneReservationBindsItsRequest(t *testing.T) {
	e := newEnv(t, 2)
	a := e.reserve("web", "req-1")
	sec, err := e.c.CoreV1().Secrets("ns").Get(ctx(t), a.SecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a.BoundSecretUID = sec.UID
	if err := e.c.CoreV1().Secrets("ns").Delete(ctx(t), a.SecretName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := e.svc.Handle(ctx(t), context.Background(), a, nil); got != OutcomeGone || err != nil {
		t.Fatalf("Handle = %q, %v; want gone", got, err)
	}
	rec, err := e.consumed.Lookup(ctx(t), "req-1")
	if err != nil || rec == nil || rec.SecretUID != sec.UID || rec.Outcome != string(OutcomeGone) {
		t.Fatalf("consumed record %+v, %v; want bound to %s, outcome gone", rec, err, sec.UID)
	}
	if n := e.helm.calls.Load(); n != 0 {
		t.Errorf("Helm ran %d times", n)
	}
}
