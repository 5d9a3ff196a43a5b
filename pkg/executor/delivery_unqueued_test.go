package executor

// A reservation that left MAX_QUEUED's count before any executor started it never runs,
// even when failing it fails and the event is redelivered: the verdict is bound with the
// request (consumed outcome "failed") and a resume of an unadopted record checks again.

import (
	"context"
	"errors"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	chartref "github.com/async-helm/async-helm/pkg/chart/ref"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
)

func TestUnqueuedUpgradeDoesNotRunOnRedelivery(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	e := newEnv(t, 1)
	e.store.SealKey, e.svc.SealKey = key, key
	e.deployRev("web", 1, helmrelease.StatusDeployed)
	if _, err := e.store.Reserve(ctx(t), release.Reservation{Namespace: "ns", Name: "web", Action: release.ActionUpgrade,
		Chart: &chart.Metadata{Name: "tiny", Version: "1.0.0"}, RequestID: "req-u"}); err != nil {
		t.Fatal(err)
	}
	a := events.Action{Action: release.ActionUpgrade, Namespace: "ns", Name: "web", Revision: 2,
		SecretName: release.SecretName("web", 2), RequestID: "req-u", Chart: chartref.Ref{URL: "https://charts.example/tiny-1.0.0.tgz"},
		Options: events.Options{Timeout: 5 * time.Minute}}
	secrets := e.c.CoreV1().Secrets("ns")
	v1, err := secrets.Get(ctx(t), release.SecretName("web", 1), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	good := v1.Data["release"]

	// The tenant: v2 leaves the count, v1's payload is garbage (its labels still say deployed).
	if _, err := secrets.Patch(ctx(t), release.SecretName("web", 2), types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"`+release.LabelQueued+`":null}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := secrets.Patch(ctx(t), release.SecretName("web", 1), types.MergePatchType,
		[]byte(`{"data":{"release":"Z2FyYmFnZQ=="}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	v2, _ := secrets.Get(ctx(t), release.SecretName("web", 2), metav1.GetOptions{})
	if release.CountsAsQueued(key, v2) {
		t.Fatal("setup: v2 still counts")
	}

	got, err := e.svc.Handle(ctx(t), context.Background(), a, nil)
	t.Logf("first delivery: %q, %v (Helm ran %d)", got, err, e.helm.calls.Load())

	// The tenant puts v1 back (status label and payload) before the redelivery.
	v1, _ = secrets.Get(ctx(t), release.SecretName("web", 1), metav1.GetOptions{})
	v1.Data["release"] = good
	v1.Labels[release.LabelStatus] = "deployed"
	delete(v1.Annotations, release.AnnotationFailure)
	if _, err := secrets.Update(ctx(t), v1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	got, err = e.svc.Handle(ctx(t), context.Background(), a, nil)
	t.Logf("redelivery: %q, %v (Helm ran %d)", got, err, e.helm.calls.Load())
	if n := e.helm.calls.Load(); n != 0 {
		t.Fatalf("Helm ran %d time(s) a reservation that had left MAX_QUEUED's count before any executor started it (outcome %s)", n, got)
	}
}

// The same for an install (no base revision to break): the tenant writes its own Secret in
// a tight loop and wins the executor's read-modify-write 5 times in a row
// (retry.DefaultRetry), here a conflict on every Secret update during the first delivery.
func TestUnqueuedInstallDoesNotRunAfterConflicts(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	e := newEnv(t, 1)
	e.store.SealKey, e.svc.SealKey = key, key
	a := e.reserve("web", "req-1")
	e.relabel(map[string]*string{release.LabelQueued: nil})
	e.c.Fail("update", "secrets", apierrors.NewConflict(schema.GroupResource{Resource: "secrets"}, release.SecretName("web", 1), errors.New("the tenant wrote it first")))
	got, err := e.svc.Handle(ctx(t), context.Background(), a, nil)
	t.Logf("first delivery: %q, %v (Helm ran %d)", got, err, e.helm.calls.Load())
	e.c.Fail("update", "secrets", nil)
	got, err = e.svc.Handle(ctx(t), context.Background(), a, nil)
	t.Logf("redelivery: %q, %v (Helm ran %d)", got, err, e.helm.calls.Load())
	if n := e.helm.calls.Load(); n != 0 {
		t.Fatalf("Helm ran %d time(s) a reservation that had left MAX_QUEUED's count (outcome %s)", n, got)
	}
}

// A cancel found on the Lease is bound with the request before the record is failed: when
// failing it loses to the tenant's writes, the redelivery is refused, even after the tenant
// dropped the queued label and wrote a template into the payload (so that the record looks
// adopted and the resume's count check is skipped).
func TestCancelledRequestDoesNotResumeAfterItsFailureWasLost(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	e := newEnv(t, 1)
	e.store.SealKey, e.svc.SealKey = key, key
	a := e.reserve("web", "req-1")
	e.cancelWhileLost("web", "alice")
	e.c.Fail("update", "secrets", apierrors.NewConflict(schema.GroupResource{Resource: "secrets"}, release.SecretName("web", 1), errors.New("the tenant wrote it first")))
	if got, err := e.svc.Handle(ctx(t), context.Background(), a, nil); err == nil {
		t.Fatalf("setup: the first delivery did not fail (%s)", got)
	}
	e.c.Fail("update", "secrets", nil)

	// The tenant: the Lease gone (if the executor left it), the queued label dropped, a template in the payload.
	if err := e.c.CoordinationV1().Leases("ns").Delete(ctx(t), release.LeaseName("web", 1), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	e.fakeAdoption("web")
	got, err := e.svc.Handle(ctx(t), context.Background(), a, nil)
	if n := e.helm.calls.Load(); n != 0 || err != nil || got == OutcomeDeployed {
		t.Fatalf("redelivery: %q, %v; Helm ran %d time(s) a cancelled request", got, err, n)
	}
}

// Whether Helm started is read from the consumed record, which tenants cannot write, not
// from the payload, which they can: an executor lost after consuming a request (before
// Helm) leaves it unstarted; a tenant who then drops the queued label and writes a
// template into the payload (so that it looks adopted) gets the redelivery failed unrun.
// Once Helm started (recorded), a resume runs although Helm's writes dropped the label.
func TestResumeTrustsTheRecordedStartNotThePayload(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	for _, tc := range []struct {
		name    string
		started bool
		want    Outcome
		runs    int32
	}{
		{"lost before Helm, faked adoption", false, OutcomeFailed, 0},
		{"lost after Helm started", true, OutcomeDeployed, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 1)
			e.store.SealKey, e.svc.SealKey = key, key
			a := e.reserve("web", "req-1")
			if first, err := e.consumed.Consume(ctx(t), consumed.Record{RequestID: "req-1", Namespace: "ns", Name: "web",
				Action: "install", Revision: 1, SecretUID: e.secretUID("web")}); err != nil || !first {
				t.Fatal(first, err)
			}
			if tc.started {
				if err := e.consumed.MarkStarted(ctx(t), "req-1"); err != nil {
					t.Fatal(err)
				}
			}
			e.fakeAdoption("web")
			got, err := e.svc.Handle(ctx(t), context.Background(), a, nil)
			if err != nil || got != tc.want || e.helm.calls.Load() != tc.runs {
				t.Fatalf("redelivery: %q, %v, Helm ran %d; want %q and %d", got, err, e.helm.calls.Load(), tc.want, tc.runs)
			}
		})
	}
}

// fakeAdoption is a namespace editor making its own reservation look adopted by Helm (a
// template in the payload) and leaving admission's count (the queued label dropped).
func (e *env) fakeAdoption(name string) {
	e.t.Helper()
	secrets := e.c.CoreV1().Secrets("ns")
	sec, err := secrets.Get(ctx(e.t), release.SecretName(name, 1), metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	rel, err := release.DecodeRelease(sec.Data["release"])
	if err != nil {
		e.t.Fatal(err)
	}
	rel.Chart.Templates = []*chart.File{{Name: "templates/cm.yaml", Data: []byte("kind: ConfigMap")}}
	if sec.Data["release"], err = release.EncodeRelease(rel); err != nil {
		e.t.Fatal(err)
	}
	delete(sec.Labels, release.LabelQueued)
	if _, err := secrets.Update(ctx(e.t), sec, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}
