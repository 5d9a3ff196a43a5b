package sweeper

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
)

// Helm v3.21.4's Secrets.Get dereferences nil on such a record: the sweep panicked and the
// notifier exited, for every tenant.
func TestSweepSurvivesAnUndecodableRecord(t *testing.T) {
	e := newEnv(t)
	e.hostileRecord("evil", nil)
	res, err := e.sw.SweepOnce(ctx(t))
	if err != nil || res.Failed != 1 {
		t.Fatalf("sweep: %+v %v", res, err)
	}
	rev := e.revision("evil", 1)
	if rev.Status != "failed" || rev.Queued || !strings.Contains(rev.Failure, "does not decode") {
		t.Fatalf("revision after the sweep: %+v", rev)
	}
	if res, err := e.sw.SweepOnce(ctx(t)); err != nil || res != (SweepResult{}) {
		t.Fatalf("second sweep: %+v %v", res, err)
	}
}

type consumedRecords map[string]*consumed.Record

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
			e.sw.Consumed = consumedRecords{"req-web": {RequestID: "req-web", SecretUID: e.revision("web", 1).UID}}
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
			e.sw.Consumed = consumedRecords{"req-web": {RequestID: "req-web", SecretUID: "the-original"}}
		}, "consumed for another release record"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.reserve("web", release.ActionInstall, 1)
			tc.forge(e)
			e.clock.Add(3 * time.Minute)
			res, err := e.sw.SweepOnce(ctx(t))
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

func (c consumedRecords) Lookup(_ context.Context, id string) (*consumed.Record, error) {
	return c[id], nil
}

func (c consumedRecords) Prune(context.Context, time.Duration) (int, error) { return 0, nil }
