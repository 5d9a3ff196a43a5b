package executor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

// A retry waits for its next attempt's slot (Seat.Requeue) on its delivery's open request,
// holding its place in the waiting room as it did before its first attempt. A tenant whose
// installs fail (pods never ready) with retries cannot turn the room's bound into more open
// requests than the pod is sized for (2 x MAX_PARALLEL + MAX_WAITING, as
// containerConcurrency): its newcomers are answered 429 and sent again by the Broker, and
// every chain still ends failed, none pending. When a requeued retry cost nothing, the
// Broker's retries refilled the room behind each one: 23 open on a pod sized for 4.
func TestRetriesWaitInTheRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 1)
		shipped(e.svc)
		e.svc.MaxWaitingBytes, e.svc.MaxWaiting = 128<<20, 2
		e.svc = New(*e.svc, 1)
		e.helm.run = failsAfter(e, time.Second)
		const n = 40
		var open atomic.Int32
		done := make(chan struct{}, n)
		for i := range n {
			a := e.reserveAs("a", "", fmt.Sprintf("r%d", i), fmt.Sprintf("a-%d", i))
			a.Options.Retries = 10
			go func() { // the Broker: sent again a second after each 429
				defer func() { done <- struct{}{} }()
				for {
					open.Add(1)
					_, err := e.svc.Handle(context.Background(), context.Background(), a, nil)
					open.Add(-1)
					if !errors.Is(err, ErrBusy) {
						return
					}
					time.Sleep(time.Second)
				}
			}()
		}
		most := int32(0)
		for left := n; left > 0; {
			time.Sleep(500 * time.Millisecond)
			synctest.Wait()
			most = max(most, open.Load())
			for len(done) > 0 {
				<-done
				left--
			}
		}
		if bound := int32(2*1 + 2); most > bound {
			t.Errorf("%d deliveries of one tenant open at once on a pod sized for %d (2 x MAX_PARALLEL 1 + MAX_WAITING 2)", most, bound)
		}
		for i := range n {
			revs, err := e.store.LiveHistory(ctx(t), "a", fmt.Sprintf("r%d", i))
			if err != nil {
				t.Fatal(err)
			}
			failed := 0
			for _, r := range revs {
				if r.Status == helmrelease.StatusFailed.String() {
					failed++
				}
			}
			if len(revs) != 11 || failed != len(revs) {
				t.Errorf("r%d: %d revisions, %d failed; want 11 attempts, all failed", i, len(revs), failed)
			}
		}
	})
}

// A retry waits for its next attempt's slot no longer than a delivery waits for its first
// (queueWait): past it the request ends failed, its failed attempt saying why, instead of
// waiting for as long as another tenant's action holds the slot. Without the bound, the
// retry waited the other action's two hours and ran then.
func TestARetryWaitsForItsSlotNoLongerThanADelivery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 1)
		shipped(e.svc)
		e.svc.SlotWait = 10 * time.Minute
		e.svc = New(*e.svc, 1)
		fails := failsAfter(e, time.Second)
		e.helm.run = func(ctx context.Context, req helmexec.Request) (*helmrelease.Release, error) {
			if req.Namespace == "b" {
				time.Sleep(2 * time.Hour) // holds the only slot
				return e.writes(ctx, req)
			}
			return fails(ctx, req)
		}
		a := e.reserveAs("a", "", "web", "ra")
		a.Options.Retries = 1
		b := e.reserveAs("b", "", "long", "rb")
		outcomes := make(chan Outcome, 2)
		for _, act := range []events.Action{a, b} {
			go func() {
				o, err := e.svc.Handle(context.Background(), context.Background(), act, nil)
				if err != nil {
					t.Errorf("%s: %v", act.Namespace, err)
				}
				outcomes <- o
			}()
			synctest.Wait()
		}
		<-outcomes
		<-outcomes
		revs, err := e.store.LiveHistory(ctx(t), "a", "web")
		if err != nil {
			t.Fatal(err)
		}
		status, desc := e.statusIn("a", "web")
		if len(revs) != 1 || status != helmrelease.StatusFailed || !strings.Contains(desc, "not retried: no action slot for the request's next step: none within 10m0s") {
			t.Errorf("a: %d revisions, revision 1 %s %q; want 1, failed, not retried for want of a slot", len(revs), status, desc)
		}
	})
}

// failsAfter is a fake Helm whose attempts fail after d (the pods never get ready).
func failsAfter(e *env, d time.Duration) func(context.Context, helmexec.Request) (*helmrelease.Release, error) {
	return func(ctx context.Context, req helmexec.Request) (*helmrelease.Release, error) {
		time.Sleep(d)
		s := storage.NewSecrets(e.c.CoreV1().Secrets(req.Namespace))
		key := release.SecretName(req.Name, req.Revision)
		rel, err := s.Get(key)
		if err != nil {
			return nil, err
		}
		rel.Info.Status, rel.Info.Description = helmrelease.StatusFailed, "timed out waiting for the condition"
		return rel, errors.Join(s.Update(key, rel), errors.New("timed out waiting for the condition"))
	}
}
