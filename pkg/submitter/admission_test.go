package submitter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/async-helm/async-helm/internal/testwait"
	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/auth"
	"github.com/async-helm/async-helm/pkg/ledger"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
	"github.com/async-helm/async-helm/pkg/release/lease"
)

// ledgerEnv is newEnv with the ledger submit's Start wires (written to and watched from
// the fake cluster), bounds max and perNS, request ids of their own, and namespaces nss.
func ledgerEnv(t *testing.T, max, perNS int, nss ...string) (*env, *ledger.Ledger) {
	t.Helper()
	e := newEnv(t)
	for _, ns := range nss {
		_ = e.nss.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	var n atomic.Int64
	e.svc.NewID = func() string { return fmt.Sprintf("req-%d", n.Add(1)) }
	l := &ledger.Ledger{Store: &ledger.Store{Client: e.c}, Book: ledger.NewBook(time.Hour, e.svc.Clock), Clock: e.c.Clock}
	runCtx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	if err := l.Run(runCtx); err != nil {
		t.Fatal(err)
	}
	e.svc.Ledger, e.svc.MaxQueued, e.svc.MaxQueuedPerNamespace = l, max, perNS
	e.svc.Bindings = &consumed.Store{Client: e.c}
	return e, l
}

func installIn(ns, name string) api.ReleaseRequest {
	r := install(name)
	r.Namespace = ns
	return r
}

// The bound of issue 43 (MAX_QUEUED 2 namespaces' worth, scaled down to 4 and 2): user a
// with two namespaces filled it and every other namespace got 429. Now a is one caller:
// b, in a namespace of its own, is still admitted up to its share, and a, over its share,
// gets 429 with Retry-After in a third namespace too.
func TestOneUserWithTwoNamespacesDoesNotFillTheBound(t *testing.T) {
	e, _ := ledgerEnv(t, 4, 2, "a1", "a2", "a3", "b1")
	a, b := &auth.User{Name: "a"}, &auth.User{Name: "b"}
	for i, ns := range []string{"a1", "a1", "a2", "a2"} {
		if _, err := e.svc.Submit(ctx(t), release.ActionInstall, installIn(ns, fmt.Sprint("a", i)), a); err != nil {
			t.Fatalf("a's install %d in %s, below the bound: %v", i, ns, err)
		}
	}
	for i := range 2 {
		if _, err := e.svc.Submit(ctx(t), release.ActionInstall, installIn("b1", fmt.Sprint("b", i)), b); err != nil {
			t.Fatalf("b's install %d, within its share, after a filled the bound: %v, want 201", i, err)
		}
	}
	for _, c := range []struct{ who, ns, name, scope string }{
		{"b", "b1", "b2", "in the namespace b1"},
		{"a", "a1", "a9", "in the namespace a1"},
		{"a", "a3", "a9", "of the caller, over its share a3"},
	} {
		_, err := e.svc.Submit(ctx(t), release.ActionInstall, installIn(c.ns, c.name), &auth.User{Name: c.who})
		var busy *BusyError
		if !errors.As(err, &busy) || busy.Scope != c.scope || busy.RetryAfter <= 0 {
			t.Errorf("%s's install in %s: %v, want 429 %q with Retry-After", c.who, c.ns, err, c.scope)
		}
	}
}

// The ledger is in async-helm's namespace: what a namespace editor writes on its Secrets
// (forged queued records, relabelled or unlabelled reservations) neither fills the bound
// nor frees a slot.
func TestTenantWritesDoNotMoveTheCount(t *testing.T) {
	e, l := ledgerEnv(t, 0, 2)
	for _, n := range []string{"f1", "f2", "f3"} {
		e.forge(n)
	}
	for _, n := range []string{"a", "b"} {
		if _, err := e.svc.Submit(ctx(t), release.ActionInstall, install(n), nil); err != nil {
			t.Fatalf("install %s beside 3 forged queued Secrets: %v", n, err)
		}
		e.relabel(n, `{"metadata":{"labels":{"`+release.LabelStatus+`":"deployed","`+release.LabelQueued+`":null,"`+release.LabelSeal+`":null}}}`)
	}
	if got := l.Counts("ns", "").Namespace; got != 2 {
		t.Errorf("counted in ns: %d, want 2", got)
	}
	if _, err := e.svc.Submit(ctx(t), release.ActionInstall, install("c"), nil); !errors.Is(err, ErrBusy) {
		t.Fatalf("a third install at a bound of 2, its reservations relabelled out of pending: %v, want 429", err)
	}
}

// A consumed request leaves the count: here a cancel before any executor ran it, whose
// consumed record submit writes.
func TestConsumedRequestsLeaveTheCount(t *testing.T) {
	e, l := ledgerEnv(t, 0, 2)
	e.svc.Heartbeat = &lease.Heartbeat{Client: e.c, Holder: "submit", Duration: time.Hour, Clock: e.svc.Clock}
	for _, n := range []string{"a", "b"} {
		if _, err := e.svc.Submit(ctx(t), release.ActionInstall, install(n), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.svc.Submit(ctx(t), release.ActionInstall, install("c"), nil); !errors.Is(err, ErrBusy) {
		t.Fatalf("two queued at a bound of 2: %v, want 429", err)
	}
	if out, err := e.svc.Cancel(ctx(t), "ns", "a", &auth.User{Name: "alice"}); err != nil || out.Status != "failed" {
		t.Fatalf("cancel: %+v, %v", out, err)
	}
	testwait.For(t, func() bool { return l.Counts("ns", "").Namespace == 1 })
	if _, err := e.svc.Submit(ctx(t), release.ActionInstall, install("c"), nil); err != nil {
		t.Fatalf("a cancelled request still counted: %v", err)
	}
}

// forge writes what a namespace editor can: a Secret with every label of a queued
// reservation of ours.
func (e *env) forge(name string) {
	e.t.Helper()
	l := map[string]string{release.LabelOwner: release.OwnerHelm, release.LabelName: name, release.LabelStatus: "pending-install",
		release.LabelVersion: "1", release.LabelRevision: "1", release.LabelQueued: "true", release.LabelRequestID: "r"}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: release.SecretName(name, 1), Namespace: "ns", Labels: l}, Type: release.SecretType}
	if _, err := e.c.CoreV1().Secrets("ns").Create(ctx(e.t), sec, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// relabel merge-patches the Secret of revision 1 of name, as a namespace editor can.
func (e *env) relabel(name, patch string) {
	e.t.Helper()
	if _, err := e.c.CoreV1().Secrets("ns").Patch(ctx(e.t), release.SecretName(name, 1), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// A namespace editor strips the stored event, the request-id label and the seal of its
// queued reservation just before a cancel (to put them back after it): nothing on the
// Secret named the request, so it was not bound cancelled, and ran once they were back.
// The ledger names it: the cancel binds it.
func TestCancelBindsTheRequestTheLedgerNames(t *testing.T) {
	e, _ := ledgerEnv(t, 0, 0)
	e.svc.Heartbeat = &lease.Heartbeat{Client: e.c, Holder: "submit", Duration: time.Hour, Clock: e.svc.Clock}
	acc, err := e.svc.Submit(ctx(t), release.ActionInstall, install("web"), nil)
	if err != nil {
		t.Fatal(err)
	}
	e.relabel("web", `{"metadata":{"labels":{"`+release.LabelRequestID+`":null,"`+release.LabelSeal+`":null}},"data":{"`+release.DataEvent+`":null}}`)
	if out, err := e.svc.Cancel(ctx(t), "ns", "web", &auth.User{Name: "alice"}); err != nil || out.Status != "failed" {
		t.Fatalf("cancel: %+v, %v", out, err)
	}
	r, err := e.svc.Bindings.Lookup(ctx(t), acc.RequestID)
	if err != nil || r == nil || r.Outcome != consumed.OutcomeCancelled || r.SecretUID != acc.Secret.UID {
		t.Errorf("the stripped request after the cancel: %+v, %v; want bound cancelled to its reservation", r, err)
	}
}

// Concurrent installs of one tenant pass the per-namespace bound only as far as it goes:
// admission and its count are one step, not a check before a chart fetch, a values check
// and the reservation.
func TestConcurrentSubmitsStayWithinTheNamespaceBound(t *testing.T) {
	e, l := ledgerEnv(t, 1000, 2, "ns")
	var ok atomic.Int64
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := e.svc.Submit(ctx(t), release.ActionInstall, installIn("ns", fmt.Sprint("r", i)), &auth.User{Name: "mallory"}); err == nil {
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 2 || l.Counts("ns", "").Namespace != 2 {
		t.Errorf("accepted %d of 40 concurrent installs, ledger counts %d; want 2 (MAX_QUEUED_PER_NAMESPACE)", ok.Load(), l.Counts("ns", "").Namespace)
	}
}

// An uninstall is admitted like any other request: its ledger entry counts against
// everyone, so uninstalls beyond the bound are refused, not accepted past it.
func TestUninstallsAreAdmitted(t *testing.T) {
	e, l := ledgerEnv(t, 2, 1, "ns", "b1") // MAX_QUEUED 2 (ceiling 4), 1 per namespace
	mallory := &auth.User{Name: "mallory"}
	for i := range 3 {
		e.deploy(fmt.Sprint("r", i), 1, helmrelease.StatusDeployed)
	}
	var accepted int
	for i := range 3 {
		_, err := e.svc.Uninstall(ctx(t), "ns", fmt.Sprint("r", i), "", mallory)
		var busy *BusyError
		switch {
		case err == nil:
			accepted++
		case !errors.As(err, &busy):
			t.Fatalf("uninstall %d: %v", i, err)
		}
	}
	if accepted != 1 || l.Counts("ns", "").Namespace != 1 {
		t.Errorf("accepted %d uninstalls, ledger counts %d in the namespace; want 1 (its bound)", accepted, l.Counts("ns", "").Namespace)
	}
	if _, err := e.svc.Submit(ctx(t), release.ActionInstall, installIn("b1", "b0"), &auth.User{Name: "bob"}); err != nil {
		t.Errorf("bob's first install in his own namespace: %v", err)
	}
}

// Admission bounds what a tenant made, not only what it has queued: each request leaves a
// consumed record in async-helm's namespace (kept EVENT_MAX_AGE + 1 h), so one that
// installs and cancels in a loop, never more than one queued, is refused past its share of
// MAX_RETAINED, and another tenant is still admitted.
func TestRetainedRequestsAreBoundedPerTenant(t *testing.T) {
	e, l := ledgerEnv(t, 4, 2, "a", "b")
	e.svc.MaxRetained = 20
	e.svc.Heartbeat = &lease.Heartbeat{Client: e.c, Holder: "submit", Duration: time.Hour, Clock: e.svc.Clock}
	mallory := &auth.User{Name: "mallory"}
	var refusal *BusyError
	made := 0
	for i := 0; i < 300 && refusal == nil; i++ {
		name := fmt.Sprintf("r%d", i)
		testwait.For(t, func() bool { // a queued refusal: the cancel's record not seen yet
			_, err := e.svc.Submit(ctx(t), release.ActionInstall, installIn("a", name), mallory)
			var busy *BusyError
			switch {
			case errors.As(err, &busy) && busy.Counted == ledger.CountedRetained:
				refusal = busy
			case errors.As(err, &busy):
				return false
			case err != nil:
				t.Fatalf("install %s: %v", name, err)
			default:
				made++
				if _, err := e.svc.Cancel(ctx(t), "a", name, mallory); err != nil {
					t.Fatalf("cancel %s: %v", name, err)
				}
			}
			return true
		})
	}
	leases, err := e.c.CoordinationV1().Leases(consumed.DefaultNamespace).List(ctx(t), metav1.ListOptions{LabelSelector: consumed.Label + "=true"})
	if err != nil {
		t.Fatal(err)
	}
	if refusal == nil || refusal.RetryAfter != time.Minute || !strings.Contains(refusal.Error(), "retained") {
		t.Fatalf("%d installs and cancels by one caller, %d consumed records kept: never refused for them (%v)", made, len(leases.Items), refusal)
	}
	if made < 20 || len(leases.Items) > 25 {
		t.Errorf("refused after %d requests with %d consumed records kept, want about MAX_RETAINED (20)", made, len(leases.Items))
	}
	if _, err := e.svc.Submit(ctx(t), release.ActionInstall, installIn("b", "b0"), &auth.User{Name: "bob"}); err != nil {
		t.Errorf("another tenant, within its share, after mallory's %d: %v", l.Counts("a", "").Retained.Namespace, err)
	}
}

// The ledger entry is written beside the reservation's create: when the create fails, the
// request is bound not-accepted to no Secret, so its entry stops counting on every replica.
func TestAFailedReservationLeavesNoQueuedCount(t *testing.T) {
	e, l := ledgerEnv(t, 0, 2)
	// The reservation's name taken by a Secret without Helm's labels: the history does not
	// see it, the create does.
	taken := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: release.SecretName("web", 1), Namespace: "ns"}}
	if _, err := e.c.CoreV1().Secrets("ns").Create(ctx(t), taken, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Submit(ctx(t), release.ActionInstall, install("web"), nil); err == nil {
		t.Fatal("an install whose Secret name is taken was accepted")
	}
	testwait.For(t, func() bool { c := l.Counts("ns", ""); return c.Namespace == 0 && c.Retained.Namespace == 1 })
	rec, err := e.svc.Bindings.Lookup(ctx(t), "req-1")
	if err != nil || rec == nil || rec.Outcome != consumed.OutcomeNotAccepted || len(e.sender.sent) != 0 {
		t.Errorf("the refused request's record %+v (%v), %d events sent; want bound not-accepted, nothing sent", rec, err, len(e.sender.sent))
	}
}
