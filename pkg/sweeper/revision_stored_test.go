package sweeper

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
)

// Helm v3.21.4's Secrets.Get dereferences nil on such a record: the sweep panicked and the
// notifier exited, for every tenant.
func TestSweepSurvivesAnUndecodableRecord(t *testing.T) {
	e := newEnv(t)
	e.HostileRecord("evil", nil)
	res, err := e.sw.SweepOnce(ctx(t))
	if err != nil || res.Failed != 1 {
		t.Fatalf("sweep: %+v %v", res, err)
	}
	rev := e.Revision("evil", 1)
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
			e.sw.Consumed = consumedRecords{"req-web": {RequestID: "req-web", SecretUID: e.Revision("web", 1).UID}}
		}, ""},
		{"unsigned", func(e *env) {
			ev, _ := events.NewAccepted(victim)
			raw, _ := ev.MarshalJSON()
			e.storeEvent(raw)
		}, "is not submit's"},
		{"another release's request, relabelled", func(e *env) {
			other := victim
			other.Name, other.SecretName, other.RequestID = "db", release.SecretName("db", 1), "req-db"
			e.storeEvent(e.Signed(other))
			e.Patch("web", 1, `{"metadata":{"labels":{"async-helm.io/request-id":"req-db"}}}`)
		}, "is not this revision's"},
		{"another action", func(e *env) {
			up := victim
			up.Action = release.ActionUninstall
			e.storeEvent(e.Signed(up))
		}, "is not this revision's"},
		{"a recreated Secret (consumed for another UID)", func(e *env) {
			e.sw.Consumed = consumedRecords{"req-web": {RequestID: "req-web", SecretUID: "the-original"}}
		}, "consumed for another release record"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.Reserve("web", release.ActionInstall, 1)
			tc.forge(e)
			e.clock.Add(3 * time.Minute)
			res, err := e.sw.SweepOnce(ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			if tc.reason == "" {
				if res != (SweepResult{Redriven: 1}) || len(e.redrive.Events()) != 1 {
					t.Fatalf("want a re-send: %+v", res)
				}
				return
			}
			st, desc := e.Status("web", 1)
			if len(e.redrive.Events()) != 0 || res != (SweepResult{Failed: 1}) || st != "failed" || !strings.Contains(desc, tc.reason) {
				t.Fatalf("sent %d, %+v, %s %q; want refused with %q", len(e.redrive.Events()), res, st, desc, tc.reason)
			}
		})
	}
}

// storeEvent replaces the stored event of web v1 as a tenant can.
func (e *env) storeEvent(raw []byte) {
	e.t.Helper()
	e.Patch("web", 1, fmt.Sprintf(`{"data":{%q:%q}}`, release.DataEvent, base64.StdEncoding.EncodeToString(raw)))
}

func (c consumedRecords) Lookup(_ context.Context, id string) (*consumed.Record, error) {
	return c[id], nil
}

func (c consumedRecords) Prune(context.Context, time.Duration) (int, error) { return 0, nil }
