package storage

import (
	"errors"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
)

func rel(version int, status helmrelease.Status) *helmrelease.Release {
	return &helmrelease.Release{Name: "web", Namespace: "ns", Version: version,
		Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "tiny", Version: "0.1.0"}},
		Info:  &helmrelease.Info{Status: status}}
}

// store holds v1 deployed and the reservation v2, as submit leaves them.
func store(t *testing.T) *driver.Memory {
	t.Helper()
	m := driver.NewMemory()
	m.SetNamespace("ns")
	for _, r := range []*helmrelease.Release{rel(1, helmrelease.StatusDeployed), rel(2, helmrelease.StatusPendingUpgrade)} {
		if err := m.Create(Key("web", r.Version), r); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// The sequence of storage calls Helm's `upgrade --atomic` makes when the upgrade fails:
// create (adopt) v2, record it failed, create the rollback v3, record v3 deployed.
func TestAtomicRollbackMayCreateTheNextRevisionOnce(t *testing.T) {
	d := NewAdoptingDriver(store(t), "web", 2)
	d.AllowAtomicRollback()
	if err := d.Create(Key("web", 2), rel(2, helmrelease.StatusPendingUpgrade)); err != nil {
		t.Fatalf("adopt: %v", err)
	}
	// Before v2 is recorded failed, no rollback.
	if err := d.Create(Key("web", 3), rel(3, helmrelease.StatusPendingRollback)); !errors.Is(err, ErrConflict) {
		t.Fatalf("create v3 before v2 failed: %v, want ErrConflict", err)
	}
	if err := d.Update(Key("web", 2), rel(2, helmrelease.StatusFailed)); err != nil {
		t.Fatal(err)
	}
	// Only a pending-rollback revision, only the next one.
	if err := d.Create(Key("web", 3), rel(3, helmrelease.StatusPendingUpgrade)); !errors.Is(err, ErrConflict) {
		t.Fatalf("create v3 pending-upgrade: %v, want ErrConflict", err)
	}
	if err := d.Create(Key("web", 4), rel(4, helmrelease.StatusPendingRollback)); !errors.Is(err, ErrConflict) {
		t.Fatalf("create v4: %v, want ErrConflict", err)
	}
	if err := d.Create(Key("web", 3), rel(3, helmrelease.StatusPendingRollback)); err != nil {
		t.Fatalf("the rollback's create: %v", err)
	}
	if err := d.Create(Key("web", 4), rel(4, helmrelease.StatusPendingRollback)); !errors.Is(err, ErrConflict) {
		t.Fatalf("a second rollback: %v, want ErrConflict", err)
	}
	got, err := d.Get(Key("web", 3))
	if err != nil || got.Info.Status != helmrelease.StatusPendingRollback {
		t.Fatalf("v3: %v %v", got, err)
	}
}

func TestWithoutAtomicNoRevisionButTheReservedOne(t *testing.T) {
	d := NewAdoptingDriver(store(t), "web", 2)
	// Hidden until adopted: Helm computes v2 as the next revision.
	if _, err := d.Get(Key("web", 2)); !errors.Is(err, driver.ErrReleaseNotFound) {
		t.Fatalf("reservation visible before adoption: %v", err)
	}
	if err := d.Create(Key("web", 2), rel(2, helmrelease.StatusPendingUpgrade)); err != nil {
		t.Fatal(err)
	}
	if err := d.Update(Key("web", 2), rel(2, helmrelease.StatusFailed)); err != nil {
		t.Fatal(err)
	}
	if err := d.Create(Key("web", 3), rel(3, helmrelease.StatusPendingRollback)); !errors.Is(err, ErrConflict) {
		t.Fatalf("rollback create without atomic: %v, want ErrConflict", err)
	}
}
