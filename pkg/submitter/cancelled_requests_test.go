package submitter

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
	"github.com/async-helm/async-helm/pkg/release/lease"
)

// cancelEnv is newEnv with the consumed records, seals and the Heartbeat a cancel uses.
func cancelEnv(t *testing.T) (*env, *consumed.Store) {
	e := newEnv(t)
	bindings := &consumed.Store{Client: e.c, Namespace: "async-helm", Clock: e.svc.Clock}
	e.svc.Bindings = bindings
	e.store.SealKey = key
	e.svc.Heartbeat = &lease.Heartbeat{Client: e.c, Holder: "submit", Duration: time.Hour, Clock: e.svc.Clock}
	return e, bindings
}

// Attack (hostile-tenant review): a namespace editor moves the revision or version label of
// a queued reservation (another caller's, or its own), then that request is cancelled.
// Cancel bound the request from the labels the history was read by, and skipped a record
// whose labels no longer said "a pending revision of ours": nothing was bound. The editor
// then deletes the Secret and makes it again with the stored event, the seal and the
// labels: the sweeper binds its re-send to the new Secret (created within 2 minutes of the
// request) and the executor's consume is a first, so the cancelled request runs. The
// request is now found in the Secret itself and bound with the outcome cancelled.
func TestCancelledRequestDoesNotRunAfterItsLabelsWereMoved(t *testing.T) {
	for what, patch := range map[string]string{
		"revision label": `{"metadata":{"labels":{"` + release.LabelRevision + `":"9"}}}`,
		"version label":  `{"metadata":{"labels":{"` + release.LabelVersion + `":"9"}}}`,
	} {
		t.Run(what, func(t *testing.T) {
			e, bindings := cancelEnv(t)
			acc, err := e.svc.Submit(ctx(t), release.ActionInstall, install("web"), nil)
			if err != nil {
				t.Fatal(err)
			}
			secrets := e.c.CoreV1().Secrets("ns")
			if _, err := secrets.Patch(ctx(t), acc.Secret.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			kept, err := secrets.Get(ctx(t), acc.Secret.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// Cancel fails the record it read (its version from the Secret's name); what keeps
			// its request from running once the record is made again is what is bound.
			_, _ = e.svc.Cancel(ctx(t), "ns", "web", nil)
			// The editor makes the Secret again with what it kept: the stored event, the seal.
			if err := secrets.Delete(ctx(t), acc.Secret.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			again := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: kept.Name, Namespace: "ns", Labels: kept.Labels},
				Type: kept.Type, Data: kept.Data}
			remade, err := secrets.Create(ctx(t), again, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// The executor's first step on the re-made Secret (and the sweeper's check).
			first, err := bindings.Consume(ctx(t), consumed.Record{RequestID: acc.RequestID, Namespace: "ns", Name: "web",
				Action: string(release.ActionInstall), Revision: 1, SecretUID: remade.UID})
			if first || !errors.Is(err, consumed.ErrConsumedElsewhere) {
				t.Errorf("consume of the cancelled request %s on the re-made Secret = %v, %v: it would run", acc.RequestID, first, err)
			}
			r, err := bindings.Lookup(ctx(t), acc.RequestID)
			if err != nil || r == nil || r.SecretUID != acc.Secret.UID || r.Outcome != consumed.OutcomeCancelled {
				t.Errorf("the cancelled request's record %+v, %v; want bound to %s with outcome %s", r, err, acc.Secret.UID, consumed.OutcomeCancelled)
			}
		})
	}
}

// A queued revision whose executor consumed the request and was lost before Helm ran (its
// Lease lapsed, so a cancel fails it at once): the cancel's binding found the request
// already bound to this Secret and wrote nothing, so the record kept no outcome, and a
// delivery after the editor rewound the failed record in place resumed the cancelled
// request. The cancel now records cancelled on it.
func TestCancelRecordsTheOutcomeOfARequestItsLostExecutorBound(t *testing.T) {
	e, bindings := cancelEnv(t)
	acc, err := e.svc.Submit(ctx(t), release.ActionInstall, install("web"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if first, err := bindings.Consume(ctx(t), consumed.Record{RequestID: acc.RequestID, Namespace: "ns", Name: "web",
		Action: string(release.ActionInstall), Revision: 1, SecretUID: acc.Secret.UID}); !first || err != nil {
		t.Fatal(first, err)
	}
	if out, err := e.svc.Cancel(ctx(t), "ns", "web", nil); err != nil || out.Status != "failed" {
		t.Fatalf("cancel = %+v, %v", out, err)
	}
	r, err := bindings.Lookup(ctx(t), acc.RequestID)
	if err != nil || r == nil || r.Outcome != consumed.OutcomeCancelled {
		t.Errorf("the request's record after the cancel: %+v, %v; want outcome %s (else a rewound record resumes it)", r, err, consumed.OutcomeCancelled)
	}
}
