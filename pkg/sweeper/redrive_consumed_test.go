package sweeper

import (
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/internal/hostile"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
)

// rewind rewrites revision 1 of name in place (same UID, same creationTimestamp) back to
// pending-install with the stored event, as a namespace editor can.
func (e *env) rewindWithEvent(name, stored string) {
	e.t.Helper()
	if err := hostile.Rewind(ctx(e.t), e.c.CoreV1().Secrets("ns"), release.SecretName(name, 1), helmrelease.StatusPendingInstall, []byte(stored)); err != nil {
		e.t.Fatal(err)
	}
}

// Attack: the same on a request its caller cancelled while it was queued: submit bound it to
// its Secret (a consumed record whose outcome is "cancelled") and failed the revision. Rewound in place
// with its stored event, it must not be sent again (the executor would resume it: a cancelled
// request would run, as its caller).
func TestCancelledRequestRewoundIsNotSentAgain(t *testing.T) {
	e := newEnv(t)
	records := &consumed.Store{Client: e.c, Namespace: "async-helm", Clock: e.clock}
	e.sw.Consumed = records
	stored := e.Reserve("web", release.ActionInstall, 1)
	if _, err := records.Consume(ctx(t), consumed.Record{RequestID: "req-web", Namespace: "ns", Name: "web",
		Action: "install", Revision: 1, SecretUID: e.Revision("web", 1).UID, Outcome: consumed.OutcomeCancelled}); err != nil { // submit's cancel binds it
		t.Fatal(err)
	}
	if _, err := e.store.MarkFailed(ctx(t), "ns", "web", 1, `Release "web" failed: cancelled by alice before an executor ran it`, release.ReplaceFailed); err != nil {
		t.Fatal(err)
	}
	e.rewindWithEvent("web", stored)
	e.clock.Add(3 * time.Minute)
	res, err := e.sw.SweepOnce(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if res.Redriven != 0 {
		t.Errorf("the cancelled request was sent again %d time(s), bound to its record: the executor resumes it", res.Redriven)
	}
}
