package submitter

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/auth"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/lease"
)

// supersedeEnv: web has revision 1 deployed and revision 2 an accepted upgrade (req-1).
func supersedeEnv(t *testing.T) *env {
	e := newEnv(t)
	e.svc.Heartbeat = &lease.Heartbeat{Client: e.c, Holder: "submit", Duration: time.Hour, Clock: e.svc.Clock}
	e.svc.Supersede = SupersedeOptions{Poll: time.Millisecond}
	n := 0
	e.svc.NewID = func() string { n++; return fmt.Sprintf("req-%d", n) }
	e.deploy("web", 1, helmrelease.StatusDeployed)
	if _, err := e.svc.Submit(ctx(t), release.ActionUpgrade, install("web"), nil); err != nil {
		t.Fatal(err)
	}
	return e
}

func superseding(name string) api.ReleaseRequest {
	r := install(name)
	r.Supersede = true
	return r
}

func (e *env) status(name string, v int) (helmrelease.Status, string) {
	e.t.Helper()
	rel, err := e.store.Get(ctx(e.t), "ns", name, v)
	if err != nil {
		e.t.Fatalf("revision %d of %s: %v", v, name, err)
	}
	return rel.Info.Status, rel.Info.Description
}

func (e *env) noLease(name string, v int) {
	e.t.Helper()
	if _, err := e.c.CoordinationV1().Leases("ns").Get(ctx(e.t), release.LeaseName(name, v), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		e.t.Errorf("lease of %s v%d: %v, want none", name, v, err)
	}
}

// A queued revision (nobody holds its Lease) is failed at once, naming the request that
// supersedes it, and the new revision is reserved and sent.
func TestSupersedeQueued(t *testing.T) {
	e := supersedeEnv(t)
	if _, err := e.svc.Submit(ctx(t), release.ActionUpgrade, install("web"), nil); !errors.Is(err, release.ErrPending) {
		t.Fatalf("upgrade without supersede while 2 is pending: %v, want 409", err)
	}
	acc, err := e.svc.Submit(ctx(t), release.ActionUpgrade, superseding("web"), &auth.User{Name: "alice"})
	if err != nil || acc.Revision != 3 || acc.RequestID != "req-2" {
		t.Fatalf("supersede = %+v, %v", acc, err)
	}
	st, desc := e.status("web", 2)
	want := `Release "web" failed: cancelled by alice: superseded by revision 3, request req-2; no executor had started it`
	if st != helmrelease.StatusFailed || !strings.HasPrefix(desc, want) {
		t.Errorf("revision 2: %s %q, want failed %q", st, desc, want)
	}
	if st, _ := e.status("web", 3); st != helmrelease.StatusPendingUpgrade {
		t.Errorf("revision 3: %s", st)
	}
	e.noLease("web", 2)
	last := e.sender.sent[len(e.sender.sent)-1]
	if a, err := events.ParseAccepted(last); err != nil || a.Revision != 3 || a.RequestID != "req-2" {
		t.Errorf("last event sent: %+v, %v", a, err)
	}
}

// A running revision is cancelled through its Lease; the new one is reserved only after the
// executor recorded the old one failed.
func TestSupersedeRunningWaitsForItsEnd(t *testing.T) {
	e := supersedeEnv(t)
	exec := &lease.Heartbeat{Client: e.c, Holder: "executor", Duration: time.Minute, Clock: e.svc.Clock}
	held, err := exec.Hold(ctx(t), "ns", release.LeaseName("web", 2))
	if held == nil || err != nil {
		t.Fatal(held, err)
	}
	ended := make(chan error, 1)
	go func() { ended <- e.fakeExecutorEnds(held, "web", 2) }()
	acc, err := e.svc.Submit(ctx(t), release.ActionUpgrade, superseding("web"), &auth.User{Name: "bob"})
	if err != nil || acc.Revision != 3 {
		t.Fatalf("supersede = %+v, %v", acc, err)
	}
	if err := <-ended; err != nil {
		t.Fatal(err)
	}
	st, desc := e.status("web", 2)
	if st != helmrelease.StatusFailed || !strings.Contains(desc, "cancelled by bob: superseded by revision 3, request req-2 (context canceled)") {
		t.Errorf("revision 2: %s %q", st, desc)
	}
	if st, _ := e.status("web", 3); st != helmrelease.StatusPendingUpgrade {
		t.Errorf("revision 3: %s", st)
	}
}

// fakeExecutorEnds plays the executor of a running revision: it waits for a cancel on its
// Lease, checks that the next revision is not reserved yet, and records the failure as
// the executor does.
func (e *env) fakeExecutorEnds(held *lease.Held, name string, v int) error {
	for i := 0; ; i++ {
		if _, err := held.Sync(ctx(e.t), lease.AnnotationProgress, fmt.Sprint(i)); err != nil {
			return err
		}
		if by := held.CancelledBy(); by != "" {
			if _, err := e.store.Get(ctx(e.t), "ns", name, v+1); !errors.Is(err, release.ErrNotFound) {
				return fmt.Errorf("revision %d was reserved while %d still ran: %v", v+1, v, err)
			}
			reason := fmt.Sprintf("Release %q failed: cancelled by %s (context canceled)", name, by)
			_, err := e.store.MarkFailed(ctx(e.t), "ns", name, v, reason, release.ReplaceFailed)
			return errors.Join(err, held.Release(ctx(e.t)))
		}
		time.Sleep(time.Millisecond)
	}
}

// An executor that never ends the revision: after the wait, 503 and nothing reserved; the
// cancel stays asked on the Lease.
func TestSupersedeGivesUpWhenTheRevisionDoesNotEnd(t *testing.T) {
	e := supersedeEnv(t)
	exec := &lease.Heartbeat{Client: e.c, Holder: "executor", Duration: time.Minute, Clock: e.svc.Clock}
	if h, err := exec.Hold(ctx(t), "ns", release.LeaseName("web", 2)); h == nil || err != nil {
		t.Fatal(h, err)
	}
	// submit's own clock moves 10 s per reading; the Leases keep theirs.
	fixed := e.svc.Clock
	e.svc.Heartbeat = &lease.Heartbeat{Client: e.c, Holder: "submit", Duration: time.Hour, Clock: fixed}
	e.svc.Clock = &testingclock.IntervalClock{Time: fixed.Now(), Duration: 10 * time.Second}
	_, err := e.svc.Submit(ctx(t), release.ActionUpgrade, superseding("web"), nil)
	if !errors.Is(err, ErrNotAccepted) || !strings.Contains(err.Error(), "has not ended within 30s") {
		t.Fatalf("supersede of a revision that never ends: %v", err)
	}
	if _, err := e.store.Get(ctx(t), "ns", "web", 3); !errors.Is(err, release.ErrNotFound) {
		t.Errorf("revision 3 was reserved: %v", err)
	}
	l, _ := e.c.CoordinationV1().Leases("ns").Get(ctx(t), release.LeaseName("web", 2), metav1.GetOptions{})
	if by := l.Annotations[lease.AnnotationCancel]; by != "anonymous: superseded by revision 3, request req-2" {
		t.Errorf("cancel on the lease: %q", by)
	}
}

// What cannot be superseded, and requests that are refused anyway, write nothing: the
// pending revision stays pending with no cancel asked.
func TestSupersedeRefusalsCancelNothing(t *testing.T) {
	e := supersedeEnv(t)
	bad := superseding("web")
	bad.Values = map[string]any{"replicas": "two"}
	if _, err := e.svc.Submit(ctx(t), release.ActionUpgrade, bad, nil); !errors.Is(err, ErrValues) {
		t.Errorf("supersede with values the schema refuses: %v", err)
	}
	e.svc.Authorizer = &authz{allow: map[auth.Need]bool{}}
	if _, err := e.svc.Submit(ctx(t), release.ActionUpgrade, superseding("web"), &auth.User{Name: "eve"}); !errors.Is(err, auth.ErrForbidden) {
		t.Errorf("supersede without rights: %v", err)
	}
	e.svc.Authorizer = nil
	if _, err := e.svc.Submit(ctx(t), release.ActionInstall, superseding("web"), nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("install with supersede: %v", err)
	}
	if _, err := e.svc.Rollback(ctx(t), api.RollbackRequest{Name: "web", Namespace: "ns", Version: 2, Supersede: true}, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("rollback to the revision it supersedes: %v", err)
	}
	if st, _ := e.status("web", 2); st != helmrelease.StatusPendingUpgrade {
		t.Errorf("revision 2 is %s after refused supersedes", st)
	}
	e.noLease("web", 2)

	// An uninstall cannot be superseded, queued or not; nor a running rollback (cancel's rule).
	e.deploy("db", 1, helmrelease.StatusDeployed)
	if _, err := e.svc.Uninstall(ctx(t), "ns", "db", "", nil); err != nil {
		t.Fatal(err)
	}
	_, err := e.svc.Submit(ctx(t), release.ActionUpgrade, superseding("db"), nil)
	if !errors.Is(err, ErrNotSupersedable) || !errors.Is(err, release.ErrPending) {
		t.Errorf("supersede of an uninstall: %v", err)
	}
	e.noLease("db", 1)
	e.deploy("api", 1, helmrelease.StatusSuperseded)
	e.deploy("api", 2, helmrelease.StatusDeployed)
	if _, err := e.svc.Rollback(ctx(t), api.RollbackRequest{Name: "api", Namespace: "ns", Version: 1}, nil); err != nil {
		t.Fatal(err)
	}
	exec := &lease.Heartbeat{Client: e.c, Holder: "executor", Duration: time.Minute, Clock: e.svc.Clock}
	if h, err := exec.Hold(ctx(t), "ns", release.LeaseName("api", 3)); h == nil || err != nil {
		t.Fatal(h, err)
	}
	_, err = e.svc.Submit(ctx(t), release.ActionUpgrade, superseding("api"), nil)
	if !errors.Is(err, ErrNotSupersedable) || !errors.Is(err, ErrNotCancellable) {
		t.Errorf("supersede of a running rollback: %v", err)
	}
	if st, _ := e.status("api", 3); st != helmrelease.StatusPendingRollback {
		t.Errorf("the running rollback is %s", st)
	}
}

// A rollback supersedes as an upgrade does; its default target is the one before the
// superseded revision.
func TestRollbackSupersedes(t *testing.T) {
	e := supersedeEnv(t)
	acc, err := e.svc.Rollback(ctx(t), api.RollbackRequest{Name: "web", Namespace: "ns", Supersede: true}, &auth.User{Name: "alice"})
	if err != nil || acc.Revision != 3 {
		t.Fatalf("rollback with supersede = %+v, %v", acc, err)
	}
	if st, desc := e.status("web", 2); st != helmrelease.StatusFailed || !strings.Contains(desc, "superseded by revision 3, request req-2") {
		t.Errorf("revision 2: %s %q", st, desc)
	}
	a, err := events.ParseAccepted(e.sender.sent[len(e.sender.sent)-1])
	if err != nil || a.Action != release.ActionRollback || a.RollbackTo != 1 || a.Revision != 3 {
		t.Errorf("rollback event: %+v, %v", a, err)
	}
	if st, _ := e.status("web", 3); st != helmrelease.StatusPendingRollback {
		t.Errorf("revision 3: %s", st)
	}
}

// Another upgrade that reserves the next revision as soon as the superseded one ended: of
// the two, exactly one gets revision 3; the other answers 409 and reserves nothing.
func TestSupersedeRacesAnUpgradeForTheNextRevision(t *testing.T) {
	e := supersedeEnv(t)
	var n atomic.Int32
	e.svc.NewID = func() string { return fmt.Sprintf("id-%d", n.Add(1)) }
	exec := &lease.Heartbeat{Client: e.c, Holder: "executor", Duration: time.Minute, Clock: e.svc.Clock}
	held, err := exec.Hold(ctx(t), "ns", release.LeaseName("web", 2))
	if held == nil || err != nil {
		t.Fatal(held, err)
	}
	other := make(chan error, 1)
	go func() {
		if err := e.fakeExecutorEnds(held, "web", 2); err != nil {
			other <- err
			return
		}
		_, err := e.svc.Submit(ctx(t), release.ActionUpgrade, install("web"), nil)
		other <- err
	}()
	_, err = e.svc.Submit(ctx(t), release.ActionUpgrade, superseding("web"), nil)
	errOther := <-other
	won := 0
	for _, err := range []error{err, errOther} {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, release.ErrConflict) && !errors.Is(err, release.ErrPending):
			t.Errorf("the loser's error: %v, want a 409", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d requests got revision 3 (supersede: %v; other: %v)", won, err, errOther)
	}
	if _, err := e.store.Get(ctx(t), "ns", "web", 4); !errors.Is(err, release.ErrNotFound) {
		t.Errorf("revision 4 exists: %v", err)
	}
	t.Logf("supersede: %v; the other upgrade: %v", err, errOther)
}
