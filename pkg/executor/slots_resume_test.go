package executor

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"

	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/fairqueue"
	"github.com/async-helm/async-helm/pkg/helmexec"
)

// Tenant A's first install renders in a worker (its CPU slot given back) while eight more
// of A's installs arrive; each holds the one CPU slot 10 s before its own render. The first
// install's deadline (1 m, from its first CPU slot) runs meanwhile: it takes the slot again
// ahead of A's installs that have not started, and every install deploys. Rejoining the
// back of A's queue, behind the eight (80 s), it ran out of time before Helm stored the
// release: "context canceled (the reservation was not adopted)".
func TestAStartedActionResumesAheadOfItsTenantsNewWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 16)                            // MaxActionTime 1 m
		e.svc.CPUSlots, e.svc.SlotWait = 1, time.Hour // a first CPU slot may take an hour
		e.svc = New(*e.svc, 16)
		e.helm.run = func(ctx context.Context, req helmexec.Request) (*helmrelease.Release, error) {
			gate := e.helm.gate(req.Name)
			time.Sleep(10 * time.Second) // the chart, on the CPU slot
			gate.Waiting()               // the render, in a worker
			time.Sleep(time.Second)
			gate.Working()
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("%w (the reservation was not adopted)", err)
			}
			time.Sleep(10 * time.Second) // the apply and the record's write
			return e.writes(ctx, req)
		}
		const n = 9
		outcomes := make(chan string, n)
		for i := range n {
			a := e.reserveAs("a", "alice", fmt.Sprintf("web%d", i), fmt.Sprintf("a-%d", i))
			go func() {
				o, err := e.svc.Handle(context.Background(), context.Background(), a, nil)
				outcomes <- fmt.Sprintf("%s %s %v", a.Name, o, err)
			}()
			synctest.Wait() // web0 holds the CPU slot; the others queue in that order
		}
		for range n {
			if got := <-outcomes; !strings.HasSuffix(got, " deployed <nil>") {
				name, _, _ := strings.Cut(got, " ")
				st, desc := e.statusIn("a", name)
				t.Errorf("%s: %s %q", got, st, desc)
			}
		}
		if !e.svc.Drained() || e.svc.cpu.InUse() != 0 {
			t.Errorf("slots left taken: %d CPU, drained %v", e.svc.cpu.InUse(), e.svc.Drained())
		}
	})
}

// Tenant A's two applies make their API round trips (slow: A's own API flow) holding both
// CPU slots. B's install, another tenant's, takes a slot A's apply lends (A is above its
// share, B below) and deploys while A's applies go on; they finish without a slot. Before,
// the CPU pool lent nothing: B waited for A's applies to end.
func TestTheApplyLendsItsCPUSlotToATenantBelowItsShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 8)
		e.svc.CPUSlots = 2
		e.svc = New(*e.svc, 8)
		applied := make(chan struct{})
		e.helm.run = func(ctx context.Context, req helmexec.Request) (*helmrelease.Release, error) {
			if req.Namespace == "a" {
				api := e.helm.api(req.Name)
				api.Calling()
				<-applied
				api.Returned()
			}
			return e.writes(ctx, req)
		}
		outcomes := make(chan string, 3)
		handle := func(ns, user, name string) {
			a := e.reserveAs(ns, user, name, ns+"-"+name)
			go func() {
				o, err := e.svc.Handle(context.Background(), context.Background(), a, nil)
				outcomes <- fmt.Sprintf("%s %s %v", name, o, err)
			}()
			synctest.Wait()
		}
		handle("a", "alice", "big1")
		handle("a", "alice", "big2")
		if _, cpu := e.svc.Shares(); len(cpu) != 1 || cpu[0].Held != 2 {
			t.Fatalf("A's applies do not hold both CPU slots: %+v", cpu)
		}
		handle("b", "bob", "tiny")
		select {
		case got := <-outcomes:
			if got != "tiny deployed <nil>" {
				t.Errorf("B's install: %s", got)
			}
		default:
			_, cpu := e.svc.Shares()
			t.Errorf("B's install waits while A's applies hold both CPU slots on API round trips: %+v", cpu)
		}
		close(applied)
		synctest.Wait()
		for len(outcomes) > 0 {
			if got := <-outcomes; !strings.HasSuffix(got, " deployed <nil>") {
				t.Errorf("outcome: %s", got)
			}
		}
		if !e.svc.Drained() || e.svc.cpu.InUse() != 0 {
			t.Errorf("slots left taken: %d CPU, drained %v", e.svc.cpu.InUse(), e.svc.Drained())
		}
	})
}

// The wait for an action's first CPU slot ends: as long as its delivery may wait for an
// action slot (54 m for Helm's default timeout at the shipped settings), then the action
// fails with that reason, its record not left pending. Before, it waited as long as the
// slots stayed busy.
func TestTheFirstCPUWaitIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 4)
		shipped(e.svc)
		e.svc.CPUSlots = 1
		e.svc = New(*e.svc, 4)
		fetching, fetched := make(chan struct{}), make(chan struct{})
		e.svc.Charts = gatedCharts{charts: charts{packaged(t)}, started: fetching, release: fetched}
		a := e.reserve("web", "r1") // timeout 5 m
		done := make(chan string, 1)
		go func() {
			o, err := e.svc.Handle(context.Background(), context.Background(), a, nil)
			done <- fmt.Sprintf("%s %v", o, err)
		}()
		<-fetching // admitted; the chart downloads before a CPU slot is taken
		hog, err := e.svc.cpu.Acquire(context.Background(), fairqueue.Flow{Namespace: "other", Caller: "carol"})
		if err != nil {
			t.Fatal(err)
		}
		defer hog.Release()
		close(fetched)
		time.Sleep(53 * time.Minute)
		synctest.Wait()
		if len(done) != 0 {
			t.Fatalf("the action ended before its bound: %s", <-done)
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		select {
		case got := <-done:
			st, desc := e.status("web")
			if got != "failed <nil>" || st != helmrelease.StatusFailed || !strings.Contains(desc, "no CPU slot to start the action: none within 54m0s") {
				t.Errorf("after 55 m without a CPU slot: %s, record %s %q", got, st, desc)
			}
		default:
			t.Error("the action still waits for its first CPU slot after 55 m (its delivery allows 54 m)")
		}
		if e.helm.calls.Load() != 0 {
			t.Errorf("Helm ran %d times", e.helm.calls.Load())
		}
	})
}

// An install's chart is loaded before its action takes a CPU slot: a load waits for the
// chart source's load slots and must not hold one of the CPU slots every tenant needs
// meanwhile (review 6, J1). A chart that does not load fails the action while another
// tenant holds every CPU slot. Before, the action waited for a CPU slot first, then
// failed "no CPU slot to start the action: none within 54m0s".
func TestTheChartLoadsBeforeACPUSlotIsTaken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 4)
		shipped(e.svc)
		e.svc.CPUSlots = 1
		e.svc = New(*e.svc, 4)
		fetching, fetched := make(chan struct{}), make(chan struct{})
		e.svc.Charts = gatedCharts{charts: charts{&chartsource.Chart{Digest: "sha256:x", Data: []byte("not a chart")}},
			started: fetching, release: fetched}
		a := e.reserve("web", "r1")
		var o Outcome
		var err error
		done := make(chan struct{})
		go func() {
			defer close(done)
			o, err = e.svc.Handle(context.Background(), context.Background(), a, nil)
		}()
		<-fetching // admitted (its reads took a CPU slot and gave it back)
		hog, herr := e.svc.cpu.Acquire(context.Background(), fairqueue.Flow{Namespace: "other", Caller: "carol"})
		if herr != nil {
			t.Fatal(herr)
		}
		defer hog.Release()
		close(fetched)
		<-done
		st, desc := e.status("web")
		if o != OutcomeFailed || err != nil || st != helmrelease.StatusFailed || strings.Contains(desc, "CPU slot") {
			t.Errorf("an unloadable chart while every CPU slot is held: %s %v, record %s %q; want failed for its chart", o, err, st, desc)
		}
		if e.helm.calls.Load() != 0 {
			t.Errorf("Helm ran %d times", e.helm.calls.Load())
		}
	})
}
