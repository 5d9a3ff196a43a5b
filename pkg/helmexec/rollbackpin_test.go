package helmexec

import (
	"errors"
	"io"
	"strings"
	"testing"

	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

const escalation = "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: mallory\n  namespace: prod\n"

// deployedTwice installs web v1 and upgrades it to v2, and pins v1 as submit does.
func deployedTwice(t *testing.T, f *Factory, mem *storage.Memory, opts []Option) *release.Pin {
	t.Helper()
	reserve(t, mem, "web", 1, helmrelease.StatusPendingInstall)
	if _, err := f.Install(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 1, Chart: tiny("1.0.0")}, opts...); err != nil {
		t.Fatal(err)
	}
	pin, err := release.PinOf(get(t, mem, "web", 1), "")
	if err != nil {
		t.Fatal(err)
	}
	reserve(t, mem, "web", 2, helmrelease.StatusPendingUpgrade)
	if _, err := f.Upgrade(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 2, Chart: tiny("2.0.0")}, opts...); err != nil {
		t.Fatal(err)
	}
	return pin
}

// rewrite is a namespace editor replacing revision v's manifest in place.
func rewrite(t *testing.T, mem *storage.Memory, v int) {
	t.Helper()
	rel := get(t, mem, "web", v)
	rel.Manifest = escalation
	if err := mem.Update(release.SecretName("web", v), rel); err != nil {
		t.Fatal(err)
	}
}

// A rollback restores only the record pinned at acceptance: the pinned one as it was runs,
// a rewritten one is refused at Helm's read of it, naming the revision.
func TestRollbackRestoresOnlyThePinnedRecord(t *testing.T) {
	for _, engine := range []func(*testing.T) (*Factory, *storage.Memory, []Option){offline, offlineV4} {
		for _, rewritten := range []bool{false, true} {
			rollbackOnce(t, engine, rewritten)
		}
	}
}

func rollbackOnce(t *testing.T, engine func(*testing.T) (*Factory, *storage.Memory, []Option), rewritten bool) {
	t.Helper()
	f, mem, opts := engine(t)
	pin := deployedTwice(t, f, mem, opts)
	if rewritten {
		rewrite(t, mem, 1)
	}
	reserve(t, mem, "web", 3, helmrelease.StatusPendingRollback)
	rel, err := f.Rollback(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 3, RollbackTo: 1, RollbackPin: pin}, opts...)
	if !rewritten {
		if err != nil || rel.Info.Status != helmrelease.StatusDeployed {
			t.Fatalf("rollback to the pinned record: %v", err)
		}
		return
	}
	if !errors.Is(err, release.ErrTargetRewritten) || !strings.Contains(err.Error(), "revision 1 was rewritten") {
		t.Fatalf("rollback to a rewritten record: %v", err)
	}
	if got := get(t, mem, "web", 3); got.Manifest == escalation || got.Info.Status == helmrelease.StatusDeployed {
		t.Errorf("revision 3 is %s with manifest %q", got.Info.Status, got.Manifest)
	}
}

// An atomic upgrade's own rollback (Helm picks the newest deployed or superseded record)
// restores only the pinned record too.
func TestAtomicUpgradeRestoresOnlyThePinnedRecord(t *testing.T) {
	f, mem, opts := offline(t)
	reserve(t, mem, "web", 1, helmrelease.StatusPendingInstall)
	if _, err := f.Install(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 1, Chart: tiny("1.0.0")}, opts...); err != nil {
		t.Fatal(err)
	}
	pin, err := release.PinOf(get(t, mem, "web", 1), "")
	if err != nil {
		t.Fatal(err)
	}
	rewrite(t, mem, 1)
	reserve(t, mem, "web", 2, helmrelease.StatusPendingUpgrade)
	failing := &kubefake.FailingKubeClient{PrintingKubeClient: kubefake.PrintingKubeClient{Out: io.Discard}, WaitError: errors.New("never ready")}
	_, err = f.Upgrade(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 2, Chart: tiny("2.0.0"), Atomic: true, RollbackPin: pin},
		append(opts, WithKubeClient(failing))...)
	if err == nil || !strings.Contains(err.Error(), "revision 1 was rewritten") {
		t.Fatalf("atomic upgrade: %v", err)
	}
	all, _ := mem.List(func(r *helmrelease.Release) bool { return r.Manifest == escalation && r.Version != 1 })
	if len(all) != 0 {
		t.Errorf("the rewritten manifest was restored as revision %d", all[0].Version)
	}
}

// pinOf pins revision v of web as submit does.
func pinOf(t *testing.T, mem *storage.Memory, v int) *release.Pin {
	t.Helper()
	pin, err := release.PinOf(get(t, mem, "web", v), "")
	if err != nil {
		t.Fatal(err)
	}
	return pin
}

// A rollback or an atomic upgrade without a pin is refused before Helm runs, on both engines.
func TestUnpinnedRollbacksAreRefused(t *testing.T) {
	for _, engine := range []func(*testing.T) (*Factory, *storage.Memory, []Option){offline, offlineV4} {
		f, mem, opts := engine(t)
		deployedTwice(t, f, mem, opts)
		reserve(t, mem, "web", 3, helmrelease.StatusPendingRollback)
		_, err := f.Rollback(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 3, RollbackTo: 1}, opts...)
		if !errors.Is(err, ErrNoRollbackPin) || !strings.Contains(err.Error(), "rollback ns/web revision 3 refused") {
			t.Errorf("unpinned rollback: %v", err)
		}
		if got := get(t, mem, "web", 3); got.Info.Status != helmrelease.StatusPendingRollback {
			t.Errorf("revision 3 is %s after the refused rollback", got.Info.Status)
		}
		reserve(t, mem, "web", 4, helmrelease.StatusPendingUpgrade)
		_, err = f.Upgrade(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 4, Chart: tiny("3.0.0"), Atomic: true}, opts...)
		if !errors.Is(err, ErrNoRollbackPin) || !strings.Contains(err.Error(), "atomic upgrade ns/web revision 4 refused") {
			t.Errorf("unpinned atomic upgrade: %v", err)
		}
		if got := get(t, mem, "web", 4); got.Info.Status != helmrelease.StatusPendingUpgrade {
			t.Errorf("revision 4 is %s after the refused upgrade", got.Info.Status)
		}
	}
}

// The rollback target's apply method is read from its Secret with the record and checked
// against the pin: a tenant switching it (Helm v4's server_side=auto follows it) is refused.
func TestRollbackPinCoversTheTargetsApplyMethod(t *testing.T) {
	si := fake.NewClientset().CoreV1().Secrets("ns")
	key := release.SecretName("web", 1)
	rel := &helmrelease.Release{Name: "web", Namespace: "ns", Version: 1, Chart: tiny("1.0.0"), Manifest: "kind: ConfigMap\n",
		Info: &helmrelease.Info{Status: helmrelease.StatusSuperseded}}
	if err := storage.NewSecrets(si).Create(key, rel); err != nil {
		t.Fatal(err)
	}
	setMethod := func(m string) {
		sec, err := si.Get(ctx(t), key, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sec.Data["release"], err = release.WithV4Fields(sec.Data["release"], release.V4Fields{ApplyMethod: m}); err != nil {
			t.Fatal(err)
		}
		if _, err := si.Update(ctx(t), sec, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setMethod("csa")
	pin, err := release.PinOf(rel, "csa")
	if err != nil {
		t.Fatal(err)
	}
	var o configOptions
	withRollbackPin(Request{Name: "web", Revision: 2, RollbackPin: pin})(&o)
	var d storage.Driver = release.GuardedSecrets(o.secrets[0](si))
	d = o.wraps[0](d)
	if _, err := d.Get(key); err != nil {
		t.Fatalf("the pinned record: %v", err)
	}
	setMethod("ssa")
	if _, err := d.Get(key); !errors.Is(err, release.ErrTargetRewritten) {
		t.Fatalf("apply method rewritten: %v", err)
	}
}
