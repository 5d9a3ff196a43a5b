package notifier

import (
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/release"
)

// A namespace editor writes the queued label (and the seal Helm's rewrite kept) back onto
// its finished record: it counts toward MAX_QUEUED again, and the sweeper, which reads only
// records labelled pending, never looked at it. The pass over held slots drops the label.
func TestSweepFreesTheSlotOfAFinishedRecordRelabelledQueued(t *testing.T) {
	e := newEnv(t)
	e.store.SealKey = signingKey
	e.reserve("web", release.ActionInstall, 1)
	e.set("web", 1, helmrelease.StatusDeployed, "Install complete")
	e.patch("web", 1, `{"metadata":{"labels":{"`+release.LabelQueued+`":"true"}}}`)
	if !release.CountsAsQueued(signingKey, e.meta("web", 1)) {
		t.Fatal("setup: the relabelled record does not count")
	}
	res, err := e.svc.SweepOnce(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if release.CountsAsQueued(signingKey, e.meta("web", 1)) || res.Unqueued != 1 {
		t.Fatalf("after a sweep: still counts %v, %+v; labels %v", release.CountsAsQueued(signingKey, e.meta("web", 1)), res, e.meta("web", 1).Labels)
	}
	if st, _ := e.status("web", 1); st != helmrelease.StatusDeployed {
		t.Errorf("the record itself was changed: %s", st)
	}
}

// A waiting reservation whose status label was flipped to a final one is genuine work: it
// keeps its slot (and runs when delivered) until QUEUE_DEADLINE, then it is failed like any
// revision that never started.
func TestSweepFailsAFlippedReservationOnlyPastTheQueueDeadline(t *testing.T) {
	e := newEnv(t)
	e.store.SealKey = signingKey
	e.reserve("web", release.ActionInstall, 1)
	e.patch("web", 1, `{"metadata":{"labels":{"status":"deployed"}}}`)
	if _, err := e.svc.SweepOnce(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if !release.CountsAsQueued(signingKey, e.meta("web", 1)) {
		t.Fatal("a waiting reservation lost its slot before the queue deadline")
	}
	e.clock.Add(e.svc.Sweep.QueueDeadline + time.Second)
	res, err := e.svc.SweepOnce(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	st, desc := e.status("web", 1)
	if st != helmrelease.StatusFailed || release.CountsAsQueued(signingKey, e.meta("web", 1)) || res.Failed != 1 {
		t.Fatalf("past the deadline: %s %q, %+v", st, desc, res)
	}
}
