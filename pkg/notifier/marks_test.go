package notifier

import (
	"context"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/internal/testwait"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
)

// slowMarks is a Store whose MarkNotified waits until released: the API server slow to
// rewrite a large Secret.
type slowMarks struct {
	Store
	release chan struct{}
}

func (s slowMarks) MarkNotified(ctx context.Context, rev release.Revision, sig string) error {
	select {
	case <-s.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.Store.MarkNotified(ctx, rev, sig)
}

// One worker, a record of the reported status that hangs: the next release's transition is
// still reported (the mark no longer holds the worker that sent), and once the API server
// answers, both statuses are recorded. Seen failing with the mark made by the sending
// worker: the second event never came while the first mark hung.
func TestASlowMarkDoesNotHoldTheNextEvent(t *testing.T) {
	e := newEnv(t)
	e.svc.Workers = 1
	slow := slowMarks{Store: e.store, release: make(chan struct{})}
	e.svc.Store = slow
	e.Reserve("a", release.ActionInstall, 1)
	e.Reserve("b", release.ActionInstall, 1)
	e.Patch("a", 1, `{"metadata":{"annotations":{"`+release.AnnotationNotified+`":"pending-install"}}}`)
	e.Patch("b", 1, `{"metadata":{"annotations":{"`+release.AnnotationNotified+`":"pending-install"}}}`)
	if err := e.svc.Start(ctx(t), true); err != nil {
		t.Fatal(err)
	}
	e.Set("a", 1, helmrelease.StatusDeployed, "")
	testwait.For(t, func() bool { return len(e.sink.Events()) == 1 })
	e.Set("b", 1, helmrelease.StatusDeployed, "")
	want := events.StatusEventID("ns", "b", 1, "deployed", "req-b")
	testwait.For(t, func() bool { evs := e.sink.Events(); return len(evs) == 2 && evs[1].ID() == want })
	close(slow.release)
	testwait.For(t, func() bool {
		return e.Revision("a", 1).Notified == "deployed" && e.Revision("b", 1).Notified == "deployed"
	})
}
