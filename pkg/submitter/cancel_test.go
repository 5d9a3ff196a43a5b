package submitter

import (
	"errors"
	"strings"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/auth"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/lease"
)

func TestCancel(t *testing.T) {
	e := newEnv(t)
	e.svc.Heartbeat = &lease.Heartbeat{Client: e.c, Holder: "submit", Duration: time.Hour, Clock: e.svc.Clock}
	u := &auth.User{Name: "alice"}

	if _, err := e.svc.Cancel(ctx(t), "ns", "web", u); !errors.Is(err, release.ErrNotFound) {
		t.Errorf("cancel of nothing: %v", err)
	}
	// Nobody runs it: failed at once, with who cancelled, and the cancel's lease gone.
	if _, err := e.svc.Submit(ctx(t), release.ActionInstall, install("web"), nil); err != nil {
		t.Fatal(err)
	}
	out, err := e.svc.Cancel(ctx(t), "ns", "web", u)
	if err != nil || out.Status != "failed" || out.Revision != 1 {
		t.Fatalf("cancel of a queued revision = %+v, %v", out, err)
	}
	rel, err := e.store.Get(ctx(t), "ns", "web", 1)
	if err != nil || rel.Info.Status != helmrelease.StatusFailed || !strings.Contains(rel.Info.Description, "cancelled by alice before an executor ran it") {
		t.Errorf("revision %v %q, %v", rel.Info.Status, rel.Info.Description, err)
	}
	if _, err := e.c.CoordinationV1().Leases("ns").Get(ctx(t), release.LeaseName("web", 1), metav1.GetOptions{}); err == nil {
		t.Error("the cancel's lease stayed")
	}
	if _, err := e.svc.Cancel(ctx(t), "ns", "web", u); !errors.Is(err, ErrNotPending) {
		t.Errorf("cancel of a final revision: %v", err)
	}

	// An executor runs it: the request goes on its lease, the revision stays pending.
	if _, err := e.svc.Submit(ctx(t), release.ActionInstall, install("db"), nil); err != nil {
		t.Fatal(err)
	}
	exec := &lease.Heartbeat{Client: e.c, Holder: "executor", Duration: time.Minute, Clock: e.svc.Clock}
	if h, err := exec.Hold(ctx(t), "ns", release.LeaseName("db", 1)); h == nil || err != nil {
		t.Fatal(h, err)
	}
	out, err = e.svc.Cancel(ctx(t), "ns", "db", nil)
	if err != nil || out.Status != "cancelling" {
		t.Fatalf("cancel of a running revision = %+v, %v", out, err)
	}
	l, _ := e.c.CoordinationV1().Leases("ns").Get(ctx(t), release.LeaseName("db", 1), metav1.GetOptions{})
	if l.Annotations[lease.AnnotationCancel] != "anonymous" {
		t.Errorf("lease annotations %v", l.Annotations)
	}
	if rel, _ := e.store.Get(ctx(t), "ns", "db", 1); rel.Info.Status != helmrelease.StatusPendingInstall {
		t.Errorf("a running revision was failed by submit: %s", rel.Info.Status)
	}

	// Authorized as an upgrade would be.
	e.svc.Authorizer = &authz{allow: map[auth.Need]bool{}}
	if _, err := e.svc.Cancel(ctx(t), "ns", "db", u); !errors.Is(err, auth.ErrForbidden) {
		t.Errorf("cancel without rights: %v", err)
	}
}

// A running uninstall or rollback cannot be stopped half-way: cancel answers why (409),
// writes nothing on the Lease and leaves the revision pending; a queued one (nobody holds
// its Lease) is failed at once, as an install is.
func TestCancelOfRunningUninstallOrRollbackIsRefused(t *testing.T) {
	e := newEnv(t)
	e.svc.Heartbeat = &lease.Heartbeat{Client: e.c, Holder: "submit", Duration: time.Hour, Clock: e.svc.Clock}
	exec := &lease.Heartbeat{Client: e.c, Holder: "executor", Duration: time.Minute, Clock: e.svc.Clock}
	e.deploy("web", 1, helmrelease.StatusSuperseded)
	e.deploy("web", 2, helmrelease.StatusDeployed)
	e.deploy("db", 1, helmrelease.StatusDeployed)
	if _, err := e.svc.Rollback(ctx(t), api.RollbackRequest{Name: "web", Namespace: "ns", Version: 1}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Uninstall(ctx(t), "ns", "db", "1", nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		rev    int
		status helmrelease.Status
		reason string
	}{
		{"web", 3, helmrelease.StatusPendingRollback, "a running rollback cannot be cancelled"},
		{"db", 1, helmrelease.StatusUninstalling, "a running uninstall cannot be cancelled"},
	} {
		key := release.LeaseName(tc.name, tc.rev)
		if h, err := exec.Hold(ctx(t), "ns", key); h == nil || err != nil {
			t.Fatal(h, err)
		}
		out, err := e.svc.Cancel(ctx(t), "ns", tc.name, &auth.User{Name: "alice"})
		if !errors.Is(err, ErrNotCancellable) || !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("%s: cancel = %+v, %v; want %q", tc.name, out, err, tc.reason)
		}
		l, _ := e.c.CoordinationV1().Leases("ns").Get(ctx(t), key, metav1.GetOptions{})
		if _, asked := l.Annotations[lease.AnnotationCancel]; asked {
			t.Errorf("%s: the refused cancel was written on the lease", tc.name)
		}
		if rel, _ := e.store.Get(ctx(t), "ns", tc.name, tc.rev); rel.Info.Status != tc.status {
			t.Errorf("%s: revision is %s, want %s", tc.name, rel.Info.Status, tc.status)
		}
	}
	// Queued (nobody holds the Lease): failed at once.
	e.deploy("api", 1, helmrelease.StatusDeployed)
	if _, err := e.svc.Uninstall(ctx(t), "ns", "api", "1", nil); err != nil {
		t.Fatal(err)
	}
	if out, err := e.svc.Cancel(ctx(t), "ns", "api", nil); err != nil || out.Status != "failed" {
		t.Errorf("cancel of a queued uninstall = %+v, %v", out, err)
	}
}
