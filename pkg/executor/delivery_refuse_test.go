package executor

import (
	"context"
	"errors"
	"strings"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
)

// rewriteStatus rewrites the payload of web v1 only (its labels still say pending-install),
// as a tenant who may write Secrets can: the seal covers the name and request id, not this.
func (e *env) rewriteStatus(st helmrelease.Status) {
	e.t.Helper()
	secrets := e.c.CoreV1().Secrets("ns")
	sec, err := secrets.Get(ctx(e.t), release.SecretName("web", 1), metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	rel, err := release.DecodeRelease(sec.Data["release"])
	if err != nil {
		e.t.Fatal(err)
	}
	rel.Info.Status = st
	if sec.Data["release"], err = release.EncodeRelease(rel); err != nil {
		e.t.Fatal(err)
	}
	if _, err := secrets.Update(ctx(e.t), sec, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// queuedAndSealed reports whether web v1 still counts toward MAX_QUEUED (release's queued rule).
func (e *env) queuedAndSealed(key []byte) bool {
	e.t.Helper()
	sec, err := e.c.CoreV1().Secrets("ns").Get(ctx(e.t), release.SecretName("web", 1), metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	rev, _ := release.RevisionFromMeta(sec)
	return rev.Queued && rev.Ours && release.IsPending(rev.Status) && release.Sealed(key, sec)
}

// A tenant rewrote the payload of its own sealed reservations so that their events are
// refused: left queued and sealed, each counted toward MAX_QUEUED for QUEUE_DEADLINE (and
// every re-send was refused the same way), so two namespaces could fill the global limit.
// The refusal now fails such a record, with the reason. So also when the record is marked
// uninstalling with no action label, as a hand-run helm uninstall leaves it: a MarkFailed
// that left "not our uninstall" alone let a tenant hold a slot for ever with two writes
// (hostile-tenant review of 4b7699a).
func TestRefusedSealedReservationIsFailed(t *testing.T) {
	for _, status := range []helmrelease.Status{helmrelease.StatusPendingUpgrade, helmrelease.StatusUninstalling} {
		t.Run(status.String(), func(t *testing.T) {
			e := newEnv(t, 1)
			key := []byte("0123456789abcdef0123456789abcdef")
			e.store.SealKey, e.svc.SealKey = key, key
			a := e.reserve("web", "tenant-req")
			e.rewriteStatus(status)
			if status == helmrelease.StatusUninstalling {
				e.relabel(map[string]*string{release.LabelStatus: str(release.StatusUninstalling)})
			}
			got, err := e.svc.Handle(ctx(t), context.Background(), a, nil)
			if err != nil || got != OutcomeRefused {
				t.Fatalf("handle: %s, %v", got, err)
			}
			if e.queuedAndSealed(key) {
				t.Error("after the refusal the reservation still counts toward MAX_QUEUED")
			}
			st, desc := e.status("web")
			if st != helmrelease.StatusFailed || !strings.Contains(desc, "refused by the executor") || !strings.Contains(desc, status.String()) {
				t.Errorf("record is %s %q; want failed with the refusal's reason", st, desc)
			}
			if n := e.helm.calls.Load(); n != 0 {
				t.Errorf("Helm ran %d times", n)
			}
		})
	}
}

// A refused record that async-helm did not seal (a tenant's, sealed with another key, or
// with no key to check it) is not ours to write: it is left as it is.
func TestRefusedRecordWithoutOurSealIsLeftAlone(t *testing.T) {
	for _, tc := range []struct {
		name     string
		executor []byte
	}{
		{"sealed with another key", []byte("the executor's key, not the record's")},
		{"the executor has no key", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 1)
			e.store.SealKey, e.svc.SealKey = []byte("a tenant's own key"), tc.executor
			a := e.reserve("web", "tenant-req")
			e.rewriteStatus(helmrelease.StatusPendingUpgrade)
			got, err := e.svc.Handle(ctx(t), context.Background(), a, nil)
			if err != nil || got != OutcomeRefused {
				t.Fatalf("handle: %s, %v", got, err)
			}
			if st, desc := e.status("web"); st != helmrelease.StatusPendingUpgrade {
				t.Errorf("a record that is not ours was written: %s %q", st, desc)
			}
		})
	}
}

// "uninstalled" is reported from the outcome the executor records on the request's consumed
// record (async-helm's namespace), never from the tombstone Lease a tenant can write: a
// successful uninstall records it, a failed one does not.
func TestUninstallRecordsItsOutcomeOnTheConsumedRecord(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fail    bool
		outcome string
	}{
		{"uninstalled", false, consumed.OutcomeUninstalled},
		{"failed", true, string(OutcomeFailed)}, // ran, and not "uninstalled"
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 1)
			e.helm.run = e.purge
			if tc.fail {
				e.helm.run = func(context.Context, helmexec.Request) (*helmrelease.Release, error) {
					return nil, errors.New("uninstall: timed out waiting for the condition")
				}
			}
			e.deployRev("web", 1, helmrelease.StatusDeployed)
			a := e.markUninstall("web", 1, "req-u")
			if _, err := e.svc.Handle(ctx(t), context.Background(), a, nil); err != nil {
				t.Fatal(err)
			}
			rec, err := e.consumed.Lookup(ctx(t), "req-u")
			if err != nil || rec == nil {
				t.Fatalf("consumed record: %v, %v", rec, err)
			}
			if rec.Outcome != tc.outcome {
				t.Errorf("outcome %q, want %q", rec.Outcome, tc.outcome)
			}
		})
	}
}
