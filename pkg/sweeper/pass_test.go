package sweeper

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/async-helm/async-helm/internal/testrelease"
	"github.com/async-helm/async-helm/internal/testwait"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/notifier"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/lease"
)

// reserveIn makes a reservation in namespace ns as submit does; started drops its queued
// label and has an executor hold its Lease (at the clock's time, for 30 s).
func (e *env) reserveIn(ns, name string, started bool) {
	e.t.Helper()
	stored := e.Signed(events.Action{Action: release.ActionInstall, Namespace: ns, Name: name, Revision: 1,
		SecretName: release.SecretName(name, 1), RequestID: "req-" + name})
	if _, err := e.store.Reserve(ctx(e.t), release.Reservation{Namespace: ns, Name: name, Action: release.ActionInstall, Revision: 1,
		Chart: &chart.Metadata{Name: "tiny", Version: "1.0.0"}, RequestID: "req-" + name, Event: stored}); err != nil {
		e.t.Fatal(err)
	}
	if !started {
		return
	}
	if _, err := e.c.CoreV1().Secrets(ns).Patch(ctx(e.t), release.SecretName(name, 1), types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"`+release.LabelQueued+`":null}}}`), metav1.PatchOptions{}); err != nil {
		e.t.Fatal(err)
	}
	hb := &lease.Heartbeat{Client: e.c, Holder: "executor", Duration: 30 * time.Second, Clock: e.clock}
	if held, err := hb.Hold(ctx(e.t), ns, release.LeaseName(name, 1)); err != nil || held == nil {
		e.t.Fatal(held, err)
	}
}

// A sweeper pass over pending revisions of many namespaces costs no API call while none is
// due: the revisions come from the shared index and the running ones' Leases from the lease
// cache. Before, a pass LISTed every watched namespace (pending revisions, then tombstones)
// and GOT the Lease of every started revision: 2 x 20 + 100 = 140 calls here (seen failing
// so with the LIST put back). A revision that becomes due costs its own calls only.
func TestSweepPassCallsDoNotGrowWithPendingRevisions(t *testing.T) {
	e := newEnv(t)
	const namespaces, perNS = 20, 10
	for i := range namespaces {
		ns := fmt.Sprintf("t%d", i)
		e.sw.Namespaces = append(e.sw.Namespaces, ns)
		for j := range perNS {
			e.reserveIn(ns, fmt.Sprintf("r%d", j), j%2 == 0) // half queued, half running
		}
	}
	var mu sync.Mutex
	var passes []PassStats
	e.sw.OnPass = func(st PassStats) { mu.Lock(); passes = append(passes, st); mu.Unlock() }
	svc, reported := e.withNotifier()
	// The workers report each revision's pending status first: the pass is counted after.
	// The 200 are the notifier's start-up backlog, reported notifier.StartupAtOnce at a time.
	testwait.Within(t, 2*time.Minute, "every pending status reported and marked", func() bool {
		for _, r := range svc.Revisions.PendingRevisions() {
			if r.Notified != r.Status {
				return false
			}
		}
		return len(reported.Events()) == namespaces*perNS
	})
	calls := func() int { return len(e.c.Actions()) }
	before := calls()
	e.sw.pass(ctx(t))
	if n := calls() - before; n != 0 {
		t.Errorf("a pass over %d pending revisions with nothing due made %d API calls: %v", namespaces*perNS, n, verbs(e.c.Actions()[before:]))
	}
	if len(passes) != 1 || passes[0].Pending != namespaces*perNS || passes[0].Redriven != 0 {
		t.Errorf("pass stats %+v", passes)
	}

	// One dead letter: that revision's Lease, its Secret, the claim; the others still nothing.
	if _, err := e.store.MarkDeadLettered(ctx(t), "t3", release.SecretName("r1", 1), "req-r1", e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, func() bool {
		m, _ := svc.Revisions.Get("t3/" + release.SecretName("r1", 1))
		r, _ := release.RevisionFromMeta(m)
		return r.DeadLettered
	})
	before = calls()
	e.sw.pass(ctx(t))
	if n := calls() - before; n != 3 || len(e.redrive.Events()) != 1 {
		t.Errorf("a pass with one revision due made %d API calls (want 3) and %d re-sends: %v", n, len(e.redrive.Events()), verbs(e.c.Actions()[before:]))
	}
}

// withNotifier starts a notifier over the sweeper's namespaces and wires the two as
// functions/notifier does: the sweeper reads the notifier's index and Lease cache, and
// queues its tombstones. The notifier's status events go to the sink returned.
func (e *env) withNotifier() (*notifier.Service, *testrelease.Sink) {
	e.t.Helper()
	reported := &testrelease.Sink{}
	svc := &notifier.Service{Client: e.c, Metadata: e.c.Metadata(), Store: e.store, Sender: reported,
		Log: e.sw.Log, Clock: e.clock, Namespaces: e.sw.Namespaces}
	if err := svc.Start(ctx(e.t), true); err != nil {
		e.t.Fatal(err)
	}
	e.sw.Index, e.sw.Reporter = svc.Revisions, svc
	return svc, reported
}

func verbs(as []k8stesting.Action) []string {
	out := make([]string, 0, len(as))
	for _, a := range as {
		out = append(out, a.GetVerb()+" "+a.GetResource().Resource+" "+a.GetNamespace())
	}
	return out
}

// A pass re-sends at most MaxRedrivesPerPass queued revisions, those due longest first;
// the others wait for the next passes. Without the bound the first pass re-sent all five.
func TestAPassReSendsAtMostItsBound(t *testing.T) {
	e := newEnv(t)
	e.sw.Config.MaxRedrivesPerPass = 2
	for i := range 5 {
		e.reserveIn("t", fmt.Sprintf("r%d", i), false)
		e.clock.Add(time.Second) // r0 is due first, r4 last
	}
	e.clock.Add(3 * time.Minute)
	sent := func() []string {
		var out []string
		for _, ev := range e.redrive.Events() {
			out = append(out, fmt.Sprint(ev.Extensions()[events.ExtRequestID]))
		}
		return out
	}
	for pass, want := range []string{"req-r0 req-r1", "req-r0 req-r1 req-r2 req-r3", "req-r0 req-r1 req-r2 req-r3 req-r4"} {
		res, err := e.sw.SweepOnce(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(sent(), " "); got != want {
			t.Fatalf("after pass %d re-sent %q, want %q (%+v)", pass+1, got, want, res)
		}
		if wantDeferred := max(0, 3-2*pass); res.Deferred != wantDeferred {
			t.Errorf("pass %d deferred %d, want %d", pass+1, res.Deferred, wantDeferred)
		}
	}
}

// A tenant's backlog of lost deliveries does not take every re-send of a pass: the
// re-sends go one namespace at a time in turn, each namespace's due longest first. Before,
// the other tenant's one revision waited behind all of the first tenant's.
func TestAPassReSendsEachTenantInTurn(t *testing.T) {
	e := newEnv(t)
	e.sw.Config.MaxRedrivesPerPass = 2
	for i := range 5 {
		e.reserveIn("a", fmt.Sprintf("a%d", i), false)
		e.clock.Add(time.Second) // a's are all due before b's
	}
	e.reserveIn("b", "b0", false)
	e.clock.Add(3 * time.Minute)
	if _, err := e.sw.SweepOnce(ctx(t)); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range e.redrive.Events() {
		got = append(got, fmt.Sprint(ev.Extensions()[events.ExtRequestID]))
	}
	if want := "req-a0 req-b0"; strings.Join(got, " ") != want {
		t.Errorf("the first pass re-sent %q, want %q", strings.Join(got, " "), want)
	}
}
