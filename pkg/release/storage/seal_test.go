package storage

import (
	"errors"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
)

func TestSealableDriver(t *testing.T) {
	mem := driver.NewMemory()
	mem.SetNamespace("ns")
	d := &SealableDriver{Driver: mem}
	rel := func(v int) *helmrelease.Release {
		return &helmrelease.Release{Name: "web", Namespace: "ns", Version: v, Info: &helmrelease.Info{Status: helmrelease.StatusDeployed}}
	}
	if err := d.Create(Key("web", 1), rel(1)); err != nil {
		t.Fatal(err)
	}
	if err := d.Update(Key("web", 1), rel(1)); err != nil {
		t.Fatal(err)
	}
	d.Seal()
	if err := d.Create(Key("web", 2), rel(2)); !errors.Is(err, ErrSealed) {
		t.Errorf("Create after Seal: %v", err)
	}
	if err := d.Update(Key("web", 1), rel(1)); !errors.Is(err, ErrSealed) {
		t.Errorf("Update after Seal: %v", err)
	}
	if _, err := d.Delete(Key("web", 1)); !errors.Is(err, ErrSealed) {
		t.Errorf("Delete after Seal: %v", err)
	}
	// Reads still pass: Helm may look while it winds down.
	if r, err := d.Get(Key("web", 1)); err != nil || r.Version != 1 {
		t.Errorf("Get after Seal = %v, %v", r, err)
	}
	if _, err := mem.Get(Key("web", 2)); !errors.Is(err, driver.ErrReleaseNotFound) {
		t.Error("a sealed create reached the storage")
	}
}

// After FailWith, the revision's failure is written with that reason (Helm's own
// "context canceled" never reaches the record); other revisions and statuses are untouched.
func TestSealableDriverFailWith(t *testing.T) {
	mem := driver.NewMemory()
	mem.SetNamespace("ns")
	d := &SealableDriver{Driver: mem}
	rel := func(v int, st helmrelease.Status, desc string) *helmrelease.Release {
		return &helmrelease.Release{Name: "web", Namespace: "ns", Version: v, Info: &helmrelease.Info{Status: st, Description: desc}}
	}
	for _, r := range []*helmrelease.Release{rel(1, helmrelease.StatusDeployed, "Install complete"), rel(2, helmrelease.StatusPendingUpgrade, "Preparing upgrade")} {
		if err := d.Create(Key("web", r.Version), r); err != nil {
			t.Fatal(err)
		}
	}
	d.FailWith(2, `Release "web" failed: cancelled by alice`)
	helmsOwn := rel(2, helmrelease.StatusFailed, `Upgrade "web" failed: context canceled`)
	if err := d.Update(Key("web", 2), helmsOwn); err != nil {
		t.Fatal(err)
	}
	if r, _ := mem.Get(Key("web", 2)); r.Info.Status != helmrelease.StatusFailed || r.Info.Description != `Release "web" failed: cancelled by alice` {
		t.Errorf("revision 2 recorded %s %q", r.Info.Status, r.Info.Description)
	}
	if helmsOwn.Info.Description != `Upgrade "web" failed: context canceled` {
		t.Error("the caller's release was changed")
	}
	// An atomic upgrade's rollback writes other revisions and statuses: as they are.
	if err := d.Update(Key("web", 1), rel(1, helmrelease.StatusSuperseded, "superseded by rollback")); err != nil {
		t.Fatal(err)
	}
	if err := d.Create(Key("web", 3), rel(3, helmrelease.StatusDeployed, "Rollback to 1")); err != nil {
		t.Fatal(err)
	}
	for v, want := range map[int]string{1: "superseded by rollback", 3: "Rollback to 1"} {
		if r, _ := mem.Get(Key("web", v)); r.Info.Description != want {
			t.Errorf("revision %d: %q, want %q", v, r.Info.Description, want)
		}
	}
}
