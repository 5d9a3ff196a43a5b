package helmexec

import (
	"strings"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

// installTwice makes revision 1 (v=one, superseded) and 2 (v=two, deployed) of web.
func installTwice(t *testing.T, f *Factory, mem *storage.Memory, opts []Option) {
	t.Helper()
	reserve(t, mem, "web", 1, helmrelease.StatusPendingInstall)
	if _, err := f.Install(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 1, Chart: tiny("1.0.0"),
		Values: map[string]any{"v": "one"}, Labels: release.Labels("r1", 1, "tiny", "1.0.0")}, opts...); err != nil {
		t.Fatal(err)
	}
	reserve(t, mem, "web", 2, helmrelease.StatusPendingUpgrade)
	if _, err := f.Upgrade(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 2, Chart: tiny("2.0.0"),
		Values: map[string]any{"v": "two"}, Labels: release.Labels("r2", 2, "tiny", "2.0.0")}, opts...); err != nil {
		t.Fatal(err)
	}
}

// Helm's Rollback computes Last()+1 with the reservation hidden: exactly the reserved
// revision, which it adopts; the record carries this request's labels, not the target's.
func TestRollbackAdoptsTheReservation(t *testing.T) {
	f, mem, opts := offline(t)
	installTwice(t, f, mem, opts)
	reserve(t, mem, "web", 3, helmrelease.StatusPendingRollback)
	rel, err := f.Rollback(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 3, RollbackTo: 1,
		RollbackPin: pinOf(t, mem, 1), Labels: release.Labels("r3", 3, "tiny", "1.0.0")}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if rel.Version != 3 || rel.Info.Status != helmrelease.StatusDeployed || rel.Config["v"] != "one" ||
		rel.Chart.Metadata.Version != "1.0.0" || !strings.Contains(rel.Manifest, `v: "one"`) || rel.Info.Description != "Rollback to 1" {
		t.Errorf("rollback v%d %s %q config %v", rel.Version, rel.Info.Status, rel.Info.Description, rel.Config)
	}
	if rel.Labels[release.LabelRequestID] != "r3" || rel.Labels[release.LabelRevision] != "3" {
		t.Errorf("labels %v, want this request's", rel.Labels)
	}
	if v1 := get(t, mem, "web", 1); v1.Labels[release.LabelRequestID] != "r1" {
		t.Errorf("the target's labels were changed: %v", v1.Labels)
	}
	if st := get(t, mem, "web", 2).Info.Status; st != helmrelease.StatusSuperseded {
		t.Errorf("v2 is %s", st)
	}
	if all, _ := mem.List(func(*helmrelease.Release) bool { return true }); len(all) != 3 {
		t.Errorf("%d revisions, want 3 (no revision beside the reservation)", len(all))
	}
}

// A rollback whose reservation is not the next revision is refused, nothing written.
func TestRollbackRefusesAnotherKey(t *testing.T) {
	f, mem, opts := offline(t)
	installTwice(t, f, mem, opts)
	reserve(t, mem, "web", 4, helmrelease.StatusPendingRollback) // Helm computes 3
	if _, err := f.Rollback(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 4, RollbackTo: 1, RollbackPin: pinOf(t, mem, 1)}, opts...); err == nil {
		t.Fatal("rollback onto another key succeeded")
	}
	if _, err := mem.Get(release.SecretName("web", 3)); err == nil {
		t.Error("Helm created revision 3 beside the reservation")
	}
}

func TestUninstallPurgesEveryRecord(t *testing.T) {
	f, mem, opts := offline(t)
	installTwice(t, f, mem, opts)
	v2 := get(t, mem, "web", 2)
	v2.Info.Status = helmrelease.StatusUninstalling
	if err := mem.Update(release.SecretName("web", 2), v2); err != nil {
		t.Fatal(err)
	}
	rel, err := f.Uninstall(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 2}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if rel.Version != 2 || rel.Info.Status != helmrelease.StatusUninstalled {
		t.Errorf("uninstall answered v%d %s", rel.Version, rel.Info.Status)
	}
	if all, _ := mem.List(func(*helmrelease.Release) bool { return true }); len(all) != 0 {
		t.Errorf("%d records left", len(all))
	}
	if _, err := f.Uninstall(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 2}, opts...); err == nil {
		t.Error("a second uninstall of nothing succeeded")
	}
}
