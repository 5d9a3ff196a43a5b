package notifier

import (
	"context"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
	"github.com/async-helm/async-helm/pkg/release/lease"
)

type consumedRecords map[string]*consumed.Record

func (c consumedRecords) Lookup(_ context.Context, id string) (*consumed.Record, error) {
	return c[id], nil
}

// forgeTombstone writes a Lease with a tombstone's labels, finished, as a namespace editor can.
func (e *env) forgeTombstone(name, requestID string) {
	e.t.Helper()
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns",
		Labels: map[string]string{lease.LabelManagedBy: lease.ManagedByUs, release.LabelAction: string(release.ActionUninstall),
			lease.LabelRelease: "web", release.LabelRevision: "1", release.LabelRequestID: requestID},
		Annotations: map[string]string{lease.AnnotationOutcome: lease.OutcomeUninstalled, lease.AnnotationSecretUID: "uid-1"}}}
	if _, err := e.c.CoordinationV1().Leases("ns").Create(ctx(e.t), l, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// A forged tombstone was reported "uninstalled" on every sweep and never removed
// (BuryTombstone deleted the name computed from its labels, not the Lease read).
func TestForgedTombstoneIsDeletedNotReported(t *testing.T) {
	for _, tc := range []struct {
		name, lease string
		consumed    consumedRecords
		reported    bool
	}{
		{"under another name", "forged", nil, false},
		{"well named, nothing consumed", lease.TombstoneName("web", 1, "req-x"), consumedRecords{}, false},
		{"well named, consumed for another revision", lease.TombstoneName("web", 1, "req-x"),
			consumedRecords{"req-x": {RequestID: "req-x", Namespace: "ns", Name: "web", Action: "uninstall", Revision: 2, SecretUID: "uid-1"}}, false},
		{"well named, consumed, no outcome recorded", lease.TombstoneName("web", 1, "req-x"),
			consumedRecords{"req-x": {RequestID: "req-x", Namespace: "ns", Name: "web", Action: "uninstall", Revision: 1, SecretUID: "uid-1"}}, false},
		{"the executor's own", lease.TombstoneName("web", 1, "req-x"),
			consumedRecords{"req-x": {RequestID: "req-x", Namespace: "ns", Name: "web", Action: "uninstall", Revision: 1, SecretUID: "uid-1",
				Outcome: consumed.OutcomeUninstalled}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if tc.consumed != nil {
				e.svc.Consumed = tc.consumed
			}
			e.forgeTombstone(tc.lease, "req-x")
			for i := 0; i < 2; i++ { // every sweep queues every tombstone
				if err := e.svc.syncTombstone(ctx(t), tombstoneKey+"ns/"+tc.lease); err != nil {
					t.Fatal(err)
				}
			}
			want := 0
			if tc.reported {
				want = 1
			}
			if got := len(e.sink.Events()); got != want || e.tombstones() != 0 {
				t.Fatalf("reported %d times (want %d), %d tombstones left", got, want, e.tombstones())
			}
		})
	}
}

// Submit binds every accepted uninstall in async-helm's namespace when it marks it, so a
// bound consumed record proved nothing had run: a namespace editor read the marked Secret
// (its UID, its request id) and wrote a well-named tombstone Lease saying "uninstalled", or
// an unfinished one and deleted the Secret, and "uninstalled" went out (the very event id
// of the real one) while the uninstall was still queued. Only the outcome the executor
// records on the consumed record says Helm uninstalled; the forged Lease is deleted.
func TestForgedTombstoneOfAQueuedUninstallIsNotReported(t *testing.T) {
	for _, tc := range []struct {
		name   string
		forged func(e *env, l *coordinationv1.Lease)
	}{
		{"a Lease that says uninstalled", func(*env, *coordinationv1.Lease) {}},
		{"an unfinished Lease, the Secret deleted", func(e *env, l *coordinationv1.Lease) {
			delete(l.Annotations, lease.AnnotationOutcome)
			if err := e.c.CoreV1().Secrets("ns").Delete(ctx(e.t), release.SecretName("web", 1), metav1.DeleteOptions{}); err != nil {
				e.t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := deployedWeb(t)
			if _, err := e.store.MarkUninstalling(ctx(t), release.UninstallMark{Namespace: "ns", Name: "web", Revision: 1, RequestID: "req-u"}); err != nil {
				t.Fatal(err)
			}
			uid := e.Meta("web", 1).UID
			// What submit's handOver writes before it sends the uninstall's event.
			e.svc.Consumed = consumedRecords{"req-u": {RequestID: "req-u", Namespace: "ns", Name: "web",
				Action: string(release.ActionUninstall), Revision: 1, SecretUID: uid}}
			// The tenant's Lease: everything in it is read from the marked Secret.
			name := lease.TombstoneName("web", 1, "req-u")
			l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns",
				Labels: map[string]string{lease.LabelManagedBy: lease.ManagedByUs, release.LabelAction: string(release.ActionUninstall),
					lease.LabelRelease: "web", release.LabelRevision: "1", release.LabelRequestID: "req-u"},
				Annotations: map[string]string{lease.AnnotationOutcome: lease.OutcomeUninstalled, lease.AnnotationSecretUID: string(uid)}}}
			tc.forged(e, l)
			if _, err := e.c.CoordinationV1().Leases("ns").Create(ctx(t), l, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := e.svc.syncTombstone(ctx(t), tombstoneKey+"ns/"+name); err != nil {
				t.Fatal(err)
			}
			for _, ev := range e.sink.Events() {
				if ev.Type() == "dev.asynchelm.release.status.uninstalled" {
					t.Fatalf("forged tombstone reported %s (id %s) while nothing ran", ev.Type(), ev.ID())
				}
			}
			if e.tombstones() != 0 {
				t.Error("the forged tombstone was left")
			}
		})
	}
}
