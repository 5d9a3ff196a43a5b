package submitter

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
	"github.com/async-helm/async-helm/pkg/release/lease"
)

// Attack: a tenant of namespace "tenant" who learnt the request id of another caller's
// queued request (in "ns") hand-makes a pending revision in its own namespace labelled with
// that id (labels are the tenant's to write; only the seal is not) and cancels it through
// submit. Cancel binds the request read from the label to the hand-made Secret's UID, in
// the consumed records the executor trusts: the victim's bound delivery is then refused
// ("consumed for another release record") and its 201 never runs.
func TestCancelOfAHandMadeRevisionDoesNotBindAnotherCallersRequest(t *testing.T) {
	e := newEnv(t)
	bindings := &consumed.Store{Client: e.c, Namespace: "async-helm", Clock: e.svc.Clock}
	e.svc.Bindings = bindings
	e.store.SealKey = key
	e.svc.Heartbeat = &lease.Heartbeat{Client: e.c, Holder: "submit", Duration: time.Hour, Clock: e.svc.Clock}
	acc, err := e.svc.Submit(ctx(t), release.ActionInstall, install("web"), nil) // the victim's, request "req-1"
	if err != nil {
		t.Fatal(err)
	}
	l := map[string]string{release.LabelOwner: release.OwnerHelm, release.LabelName: "decoy", release.LabelStatus: "pending-install",
		release.LabelVersion: "1", release.LabelRevision: "1", release.LabelQueued: "true", release.LabelRequestID: acc.RequestID}
	decoy := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: release.SecretName("decoy", 1), Namespace: "tenant", Labels: l},
		Type: release.SecretType}
	if _, err := e.c.CoreV1().Secrets("tenant").Create(ctx(t), decoy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, _ = e.svc.Cancel(ctx(t), "tenant", "decoy", nil) // the tenant's own namespace: it has the rights
	r, err := bindings.Lookup(ctx(t), acc.RequestID)
	if err != nil {
		t.Fatal(err)
	}
	if r != nil && r.SecretUID != acc.Secret.UID {
		t.Errorf("the victim's request %s is bound to the tenant's hand-made %s/%s (%s): its delivery will be refused",
			acc.RequestID, r.Namespace, r.Name, r.SecretUID)
	}
}
