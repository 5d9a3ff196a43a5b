package executor

import (
	"context"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/internal/testwait"
	"github.com/async-helm/async-helm/pkg/helmexec"
)

// Attack: the executor keeps the delivered (bound) event in the pending Secret, where a
// namespace editor reads it. Once the victim's action has ended, the editor rewrites the
// same Secret (same UID) back to pending-install and posts the bound event to the executor's
// Service. The request was consumed for this very UID, so "resume" must not mean "run again":
// a 201 is a promise of exactly once, and the second run would act as the victim.
func TestBoundEventReplayedOnItsFinishedRecordRewoundInPlace(t *testing.T) {
	e := newEnv(t, 1)
	e.svc.RequireBinding = true
	a := e.reserve("web", "victim-req")
	a.BoundSecretUID = e.secretUID("web")
	if got, err := e.svc.Handle(ctx(t), context.Background(), a, nil); err != nil || got != OutcomeDeployed {
		t.Fatalf("the victim's own run: %s, %v", got, err)
	}
	e.rewindToPending(helmrelease.StatusPendingInstall)
	got, err := e.svc.Handle(ctx(t), context.Background(), a, nil)
	if n := e.helm.calls.Load(); n != 1 {
		t.Fatalf("Helm ran %d times for one accepted request (second handling: %s, %v)", n, got, err)
	}
}

// Attack: a namespace editor posts the unbound stored copy of a queued revision to the
// executor's Service while no slot is free, so that the genuine bound delivery, arriving
// meanwhile, joins that handling and is handed its refusal. The copy is refused before it
// can be joined: the genuine delivery runs.
func TestACopyHandledFirstDoesNotSwallowTheBoundDelivery(t *testing.T) {
	e := newEnv(t, 1)
	e.svc.RequireBinding = true
	e.svc.SlotWait = time.Minute
	release1 := make(chan struct{})
	e.helm.run = func(ctx context.Context, req helmexec.Request) (*helmrelease.Release, error) {
		if req.Name == "busy" {
			<-release1
		}
		return e.writes(ctx, req)
	}
	busy := e.reserve("busy", "req-busy")
	busy.BoundSecretUID = e.secretUID("busy")
	go func() { _, _ = e.svc.Handle(ctx(t), context.Background(), busy, nil) }()
	testwait.For(t, func() bool { return e.helm.calls.Load() == 1 }) // the one slot is taken

	genuine := e.reserve("web", "victim-req")
	copied := genuine // the stored copy: no binding
	genuine.BoundSecretUID = e.secretUID("web")
	copyDone := make(chan Outcome, 1)
	go func() { o, _ := e.svc.Handle(ctx(t), context.Background(), copied, nil); copyDone <- o }()
	got := make(chan Outcome, 1)
	go func() { o, _ := e.svc.Handle(ctx(t), context.Background(), genuine, nil); got <- o }()
	if o := <-copyDone; o != OutcomeRefused {
		t.Errorf("the copy: %s, want %s", o, OutcomeRefused)
	}
	close(release1)
	o := <-got
	if st, _ := e.status("web"); st != helmrelease.StatusDeployed {
		t.Errorf("the genuine bound delivery was answered %s and did not run: web is %s", o, st)
	}
}

// Attack: the same with a bound event of another Secret under the name (an older
// incarnation's, kept in a record the editor can read): its refusal is not handed to the
// genuine delivery either.
func TestAnotherBindingHandledFirstDoesNotSwallowTheBoundDelivery(t *testing.T) {
	e := newEnv(t, 1)
	e.svc.SlotWait = time.Minute
	e.svc.Clock = e.clock // a wait for the slot is a timer on it: the test sees who waits
	release1 := make(chan struct{})
	e.helm.run = func(ctx context.Context, req helmexec.Request) (*helmrelease.Release, error) {
		if req.Name == "busy" {
			<-release1
		}
		return e.writes(ctx, req)
	}
	busy := e.reserve("busy", "req-busy")
	go func() { _, _ = e.svc.Handle(ctx(t), context.Background(), busy, nil) }()
	testwait.For(t, func() bool { return e.helm.calls.Load() == 1 })
	testwait.For(t, func() bool { return e.clock.Waiters() == 2 }) // busy's deadline and progress ticker

	genuine := e.reserve("web", "victim-req")
	genuine.BoundSecretUID = e.secretUID("web")
	old := genuine // the older incarnation's request: its own id, bound to its own Secret
	old.RequestID, old.BoundSecretUID = "older-req", "uid-of-an-older-incarnation"
	oldDone := make(chan struct{})
	go func() { _, _ = e.svc.Handle(ctx(t), context.Background(), old, nil); close(oldDone) }()
	testwait.For(t, func() bool { return e.clock.Waiters() == 3 }) // the old one waits for the slot
	got := make(chan Outcome, 1)
	go func() { o, _ := e.svc.Handle(ctx(t), context.Background(), genuine, nil); got <- o }()
	// The genuine delivery waits for the slot too, or joins the old one's handling (the attack).
	testwait.For(t, func() bool { return e.clock.Waiters() == 4 || e.svc.joined(runKey(old)) > 0 })
	close(release1)
	<-oldDone
	o := <-got
	if st, _ := e.status("web"); st != helmrelease.StatusDeployed && o != OutcomeRefused {
		t.Logf("genuine: %s, web %s", o, st)
	}
	if o == OutcomeRefused {
		t.Errorf("the genuine bound delivery was handed another delivery's refusal")
	}
}
