package executor

// A verdict bound with the request holds against what the tenant makes of its record.

import (
	"context"
	"errors"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/async-helm/async-helm/pkg/release"
)

// A cancel found on the Lease is bound with the request before the record is failed: when
// failing it loses to the tenant's writes, the redelivery is refused, even after the tenant
// dropped the queued label and wrote a template into the payload (so that the record looks
// adopted).
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

// fakeAdoption is a namespace editor making its own reservation look adopted by Helm (a
// template in the payload, the queued label dropped).
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
