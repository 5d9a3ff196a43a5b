package executor

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"

	chartref "github.com/async-helm/async-helm/pkg/chart/ref"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/release"
)

// reserveAs reserves install name v1 in namespace ns for request id, asked by user.
func (e *env) reserveAs(ns, user, name, id string) events.Action {
	e.t.Helper()
	if _, err := e.store.Reserve(ctx(e.t), release.Reservation{Namespace: ns, Name: name, Action: release.ActionInstall,
		Chart: &chart.Metadata{Name: "tiny", Version: "1.0.0"}, RequestID: id}); err != nil {
		e.t.Fatal(err)
	}
	return events.Action{Action: release.ActionInstall, Namespace: ns, Name: name, Revision: 1,
		SecretName: release.SecretName(name, 1), RequestID: id, Chart: chartref.Ref{URL: "https://charts.example/tiny-1.0.0.tgz"},
		Options: events.Options{Timeout: 5 * time.Minute}, Caller: events.Caller{User: user}}
}

// Tenant A's installs wait on pods that never get ready and hold every action slot (A was
// alone when they started); more of A's queue behind them. B's tiny install, in another
// namespace by another user, starts at once on a slot one of A's waits lent, and deploys
// while A's still wait; A's queued one waits in A's queue. Before the fair queue, B waited
// SLOT_WAIT behind A's waits and got ErrBusy.
func TestAnotherTenantStartsWhileOneHoldsEverySlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 2)
		e.svc.SlotWait = time.Hour
		never := make(chan struct{}) // A's pods get ready only when the test ends
		var waiting atomic.Int32
		e.helm.run = func(ctx context.Context, req helmexec.Request) (*helmrelease.Release, error) {
			if req.Namespace == "a" {
				gate := e.helm.gate(req.Name)
				gate.Waiting() // Helm's wait for readiness
				waiting.Add(1)
				<-never
				gate.Working()
			}
			return e.writes(ctx, req)
		}
		outcomes := make(chan string, 3)
		for i := range 3 {
			a := e.reserveAs("a", "alice", fmt.Sprintf("slow%d", i), fmt.Sprintf("a-%d", i))
			go func() {
				o, err := e.svc.Handle(ctx(t), context.Background(), a, nil)
				outcomes <- fmt.Sprintf("%s %s %v", a.Name, o, err)
			}()
			synctest.Wait() // in order: slow0 and slow1 hold both slots, slow2 queues
		}
		if got := waiting.Load(); got != 2 {
			t.Fatalf("%d of A's installs wait with 2 slots", got)
		}
		o, err := e.svc.Handle(ctx(t), context.Background(), e.reserveAs("b", "bob", "tiny", "b-1"), nil)
		if err != nil || o != OutcomeDeployed {
			t.Fatalf("B's install while A holds every slot: %s, %v", o, err)
		}
		if got := waiting.Load(); got != 2 {
			t.Errorf("%d of A's installs wait: B ran on a slot lent by one of them", got)
		}
		// The slot B gave back goes to A's queued install (work-conserving).
		synctest.Wait()
		if got := waiting.Load(); got != 3 {
			t.Errorf("%d of A's installs wait once B is done", got)
		}
		shares, _ := e.svc.Shares()
		if len(shares) != 1 || shares[0].Namespace != "a" || shares[0].Held != 2 || shares[0].Queued != 0 {
			t.Errorf("shares once B is done: %+v", shares)
		}
		close(never)
		for range 3 {
			if got := <-outcomes; got != fmt.Sprintf("%s deployed <nil>", got[:5]) {
				t.Errorf("A's install: %s", got)
			}
		}
		if !e.svc.Drained() {
			t.Error("slots left in use")
		}
	})
}

// The ServiceAccounts of one namespace are one caller in the executor's fair queue, as in
// admission: many of them do not make a tenant many callers, each with a share.
func TestFlowOfServiceAccountsIsTheirNamespace(t *testing.T) {
	a := events.Action{Namespace: "team", Caller: events.Caller{User: "system:serviceaccount:team:sa1"}}
	b := events.Action{Namespace: "team", Caller: events.Caller{User: "system:serviceaccount:team:sa2"}}
	if fa, fb := flowOf(a), flowOf(b); fa != fb || fa.Caller != "system:serviceaccounts:team" {
		t.Errorf("flows %+v and %+v, want one caller system:serviceaccounts:team", fa, fb)
	}
	if f := flowOf(events.Action{Namespace: "team", Caller: events.Caller{User: "alice"}}); f.Caller != "alice" {
		t.Errorf("a user's flow %+v", f)
	}
}
