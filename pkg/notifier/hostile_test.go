package notifier

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
	"github.com/async-helm/async-helm/pkg/release/lease"
)

// hostileRecord is what a namespace editor can write: Helm's labels and ours (pending,
// queued, dead-lettered) on a payload that does not decode.
func (e *env) hostileRecord(name string, data map[string][]byte) {
	e.t.Helper()
	if data == nil {
		data = map[string][]byte{"release": []byte("garbage")}
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: release.SecretName(name, 1), Namespace: "ns",
		Labels: map[string]string{release.LabelOwner: release.OwnerHelm, release.LabelName: name,
			release.LabelStatus: "pending-install", release.LabelVersion: "1", release.LabelRevision: "1",
			release.LabelQueued: "true", release.LabelRequestID: "req-" + name},
		Annotations: map[string]string{release.AnnotationDeadLettered: t0.Format("2006-01-02T15:04:05Z")}},
		Type: release.SecretType, Data: data}
	if _, err := e.c.CoreV1().Secrets("ns").Create(ctx(e.t), sec, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// Helm v3.21.4's Secrets.Get dereferences nil on such a record: the sweep panicked and the
// notifier exited, for every tenant.
func TestSweepSurvivesAnUndecodableRecord(t *testing.T) {
	e := newEnv(t)
	e.hostileRecord("evil", nil)
	res, err := e.svc.SweepOnce(ctx(t))
	if err != nil || res.Failed != 1 {
		t.Fatalf("sweep: %+v %v", res, err)
	}
	rev := e.revision("evil", 1)
	if rev.Status != "failed" || rev.Queued || !strings.Contains(rev.Failure, "does not decode") {
		t.Fatalf("revision after the sweep: %+v", rev)
	}
	if res, err := e.svc.SweepOnce(ctx(t)); err != nil || res != (SweepResult{}) {
		t.Fatalf("second sweep: %+v %v", res, err)
	}
}

// A failed record that does not decode (any tenant's, ours or not) is reported from its
// labels: before, describe's decode error retried it for ever and nothing was reported.
func TestFailedUndecodableRecordIsReportedFromItsLabels(t *testing.T) {
	e := newEnv(t)
	e.hostileRecord("evil", nil)
	e.patch("evil", 1, `{"metadata":{"labels":{"status":"failed","async-helm.io/revision":null,"async-helm.io/chart":null}}}`)
	key := "ns/" + release.SecretName("evil", 1)
	if err := e.svc.sync(ctx(t), key); err != nil {
		t.Fatalf("sync: %v", err)
	}
	if got := e.sink.statuses(t); len(got) != 1 || got[0] != "failed" {
		t.Fatalf("reported %v", got)
	}
}

type consumedRecords map[string]*consumed.Record

func (c consumedRecords) Lookup(_ context.Context, id string) (*consumed.Record, error) {
	return c[id], nil
}
func (c consumedRecords) Prune(context.Context, time.Duration) (int, error) { return 0, nil }

// The sweeper re-sent whatever event a pending Secret held: a tenant who may write Secrets
// replayed another user's signed event onto a record of its choosing. It now sends only an
// event signed by submit that is this Secret's own request, consumed (if at all) for it.
func TestSweeperSendsOnlyTheSecretsOwnSignedRequest(t *testing.T) {
	victim := events.Action{Action: release.ActionInstall, Namespace: "ns", Name: "web", Revision: 1,
		SecretName: release.SecretName("web", 1), RequestID: "req-web"}
	for _, tc := range []struct {
		name   string
		forge  func(e *env) // rewrites the stored event or labels as a tenant can
		reason string       // "" : re-sent
	}{
		{"its own signed request", func(e *env) {}, ""},
		{"consumed for this very Secret (a redelivery resumes)", func(e *env) {
			e.svc.Consumed = consumedRecords{"req-web": {RequestID: "req-web", SecretUID: e.revision("web", 1).UID}}
		}, ""},
		{"unsigned", func(e *env) {
			ev, _ := events.NewAccepted(victim)
			raw, _ := ev.MarshalJSON()
			e.storeEvent(raw)
		}, "is not submit's"},
		{"another release's request, relabelled", func(e *env) {
			other := victim
			other.Name, other.SecretName, other.RequestID = "db", release.SecretName("db", 1), "req-db"
			e.storeEvent(e.signed(other))
			e.patch("web", 1, `{"metadata":{"labels":{"async-helm.io/request-id":"req-db"}}}`)
		}, "is not this revision's"},
		{"another action", func(e *env) {
			up := victim
			up.Action = release.ActionUninstall
			e.storeEvent(e.signed(up))
		}, "is not this revision's"},
		{"a recreated Secret (consumed for another UID)", func(e *env) {
			e.svc.Consumed = consumedRecords{"req-web": {RequestID: "req-web", SecretUID: "the-original"}}
		}, "consumed for another release record"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.reserve("web", release.ActionInstall, 1)
			tc.forge(e)
			e.clock.Add(3 * time.Minute)
			res, err := e.svc.SweepOnce(ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			if tc.reason == "" {
				if res != (SweepResult{Redriven: 1}) || len(e.redrive.events()) != 1 {
					t.Fatalf("want a re-send: %+v", res)
				}
				return
			}
			st, desc := e.status("web", 1)
			if len(e.redrive.events()) != 0 || res != (SweepResult{Failed: 1}) || st != "failed" || !strings.Contains(desc, tc.reason) {
				t.Fatalf("sent %d, %+v, %s %q; want refused with %q", len(e.redrive.events()), res, st, desc, tc.reason)
			}
		})
	}
}

// storeEvent replaces the stored event of web v1 as a tenant can.
func (e *env) storeEvent(raw []byte) {
	e.t.Helper()
	e.patch("web", 1, fmt.Sprintf(`{"data":{%q:%q}}`, release.DataEvent, base64.StdEncoding.EncodeToString(raw)))
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
			if got := len(e.sink.events()); got != want || e.tombstones() != 0 {
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
			uid := e.meta("web", 1).UID
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
			for _, ev := range e.sink.events() {
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

// A namespace deleted with pending work lost it with no final status event.
func TestPendingWorkOfADeletedNamespaceEndsFailed(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ns       func(e *env) // what becomes of namespace ns
		reported bool
	}{
		{"namespace gone", func(e *env) {
			if err := e.c.CoreV1().Namespaces().Delete(ctx(e.t), "ns", metav1.DeleteOptions{}); err != nil {
				e.t.Fatal(err)
			}
		}, true},
		{"namespace terminating", func(e *env) {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}}
			if _, err := e.c.CoreV1().Namespaces().Update(ctx(e.t), ns, metav1.UpdateOptions{}); err != nil {
				e.t.Fatal(err)
			}
		}, true},
		{"namespace still there (a reservation undone)", func(*env) {}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.reserve("web", release.ActionInstall, 1)
			key := "ns/" + release.SecretName("web", 1)
			m := e.meta("web", 1)
			if err := e.c.CoreV1().Secrets("ns").Delete(ctx(t), m.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			tc.ns(e)
			e.svc.deleted(key, m) // what the informer's delete handler does
			for i := 0; i < 2; i++ {
				if err := e.svc.sync(ctx(t), key); err != nil {
					t.Fatal(err)
				}
			}
			got := e.sink.events()
			if !tc.reported {
				if len(got) != 0 {
					t.Fatalf("reported %d events", len(got))
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("reported %d events, want one failed", len(got))
			}
			c, err := events.ParseStatus(got[0])
			if err != nil || c.Status != "failed" || c.RequestID != "req-web" || !strings.Contains(c.Reason, `namespace "ns" was deleted`) {
				t.Fatalf("reported %+v, %v", c, err)
			}
		})
	}
}

// A record that does not decode is logged once with its name, not on every retry or sweep.
func TestUndecodableRecordIsLoggedOnce(t *testing.T) {
	e := newEnv(t)
	core, logs := observer.New(zap.WarnLevel)
	e.svc.Log = zap.New(core).Sugar()
	e.hostileRecord("evil", nil)
	e.patch("evil", 1, `{"metadata":{"labels":{"status":"failed","async-helm.io/revision":null,"async-helm.io/chart":null}}}`)
	key := "ns/" + release.SecretName("evil", 1)
	for i := 0; i < 3; i++ {
		e.svc.observe(key, e.meta("evil", 1))
		e.svc.mu.Lock()
		e.svc.backlog[key] = []string{"failed"} // reported again, as after a restart
		e.svc.mu.Unlock()
		if err := e.svc.sync(ctx(t), key); err != nil {
			t.Fatal(err)
		}
	}
	got := logs.FilterMessageSnippet("does not decode").All()
	if len(got) != 1 || got[0].ContextMap()["secret"] != release.SecretName("evil", 1) {
		t.Fatalf("logged %d times: %v", len(got), got)
	}
}
