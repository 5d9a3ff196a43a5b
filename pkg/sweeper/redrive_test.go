package sweeper

import (
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
)

// Attack: a namespace editor kept the stored event of a request (readable while it was
// queued). After the executor ran the request (consumed for this Secret's UID, deployed),
// the editor rewrites the same Secret in place (same UID, same creationTimestamp) back to
// pending-install with the stored event, and waits for the sweeper: the request is
// "consumed for this very Secret", so the sweeper binds and re-sends it, and the executor
// resumes it: the accepted action runs a second time, as its caller.
func TestStoredEventPutBackOnItsFinishedRecordIsNotSentAgain(t *testing.T) {
	e := newEnv(t)
	records := &consumed.Store{Client: e.c, Namespace: "async-helm", Clock: e.clock}
	e.sw.Consumed = records
	stored := e.Reserve("web", release.ActionInstall, 1)
	uid := e.Revision("web", 1).UID
	if _, err := records.Consume(ctx(t), consumed.Record{RequestID: "req-web", Namespace: "ns", Name: "web",
		Action: "install", Revision: 1, SecretUID: uid}); err != nil { // the executor ran it
		t.Fatal(err)
	}
	if err := records.MarkDone(ctx(t), "req-web", "deployed"); err != nil { // and recorded its end
		t.Fatal(err)
	}
	e.Set("web", 1, helmrelease.StatusDeployed, "Install complete")

	e.rewindWithEvent("web", stored)
	e.clock.Add(3 * time.Minute)
	res, err := e.sw.SweepOnce(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if res.Redriven != 0 {
		t.Errorf("the finished request was sent again %d time(s), bound to its record: the executor resumes it", res.Redriven)
	}
}
