package storage

import (
	"errors"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
)

func relOf(name string, v int, st helmrelease.Status) *helmrelease.Release {
	return &helmrelease.Release{Name: name, Namespace: "ns", Version: v, Info: &helmrelease.Info{Status: st}}
}

// memWith is Helm's memory driver holding revisions of web.
func memWith(t *testing.T, rels ...*helmrelease.Release) *driver.Memory {
	t.Helper()
	m := driver.NewMemory()
	m.SetNamespace("ns")
	for _, r := range rels {
		if err := m.Create(Key(r.Name, r.Version), r); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// Until adopted the reservation is invisible to every read Helm makes, so Helm's checks
// see the history as it was before it.
func TestAdoptingDriverHidesTheReservation(t *testing.T) {
	mem := memWith(t, relOf("web", 1, helmrelease.StatusDeployed), relOf("web", 2, helmrelease.StatusPendingUpgrade),
		relOf("db", 2, helmrelease.StatusPendingUpgrade))
	d := NewAdoptingDriver(mem, "web", 2)
	if _, err := d.Get(Key("web", 2)); !errors.Is(err, driver.ErrReleaseNotFound) {
		t.Errorf("Get of the reservation: %v", err)
	}
	if r, err := d.Get(Key("web", 1)); err != nil || r.Version != 1 {
		t.Errorf("Get of the deployed revision: %v, %v", r, err)
	}
	if r, err := d.Get(Key("db", 2)); err != nil || r.Name != "db" {
		t.Errorf("another release's revision 2 is hidden too: %v, %v", r, err)
	}
	all, err := d.List(func(*helmrelease.Release) bool { return true })
	if err != nil || len(all) != 2 {
		t.Errorf("List = %d, %v", len(all), err)
	}
	q, err := d.Query(map[string]string{"name": "web", "owner": "helm"})
	if err != nil || len(q) != 1 || q[0].Version != 1 {
		t.Errorf("Query = %v, %v", q, err)
	}
	// Only the reservation in the answer: Helm's drivers answer "not found", not [].
	only := NewAdoptingDriver(memWith(t, relOf("new", 1, helmrelease.StatusPendingInstall)), "new", 1)
	if q, err := only.Query(map[string]string{"name": "new", "owner": "helm"}); !errors.Is(err, driver.ErrReleaseNotFound) || q != nil {
		t.Errorf("Query of a release with only its reservation = %v, %v", q, err)
	}
	if d.Adopted() {
		t.Error("adopted before any write")
	}
}

// Helm's create of the reserved key updates the reservation (same object); then it is
// visible and every later write passes through.
func TestAdoptingDriverAdopts(t *testing.T) {
	mem := memWith(t, relOf("web", 1, helmrelease.StatusPendingInstall))
	d := NewAdoptingDriver(mem, "web", 1)
	if err := d.Create(Key("web", 1), relOf("web", 1, helmrelease.StatusPendingInstall)); err != nil {
		t.Fatalf("adoption: %v", err)
	}
	if !d.Adopted() {
		t.Fatal("not adopted")
	}
	if r, err := d.Get(Key("web", 1)); err != nil || r.Version != 1 {
		t.Errorf("the adopted revision is still hidden: %v, %v", r, err)
	}
	if err := d.Update(Key("web", 1), relOf("web", 1, helmrelease.StatusDeployed)); err != nil {
		t.Fatal(err)
	}
	if r, _ := mem.Get(Key("web", 1)); r.Info.Status != helmrelease.StatusDeployed {
		t.Errorf("stored %s", r.Info.Status)
	}
	// A second create, even of the same key, would be a second revision.
	if err := d.Create(Key("web", 1), relOf("web", 1, helmrelease.StatusDeployed)); !errors.Is(err, ErrConflict) {
		t.Errorf("second create: %v", err)
	}
}

func TestAdoptingDriverRefusesOtherRevisions(t *testing.T) {
	mem := memWith(t, relOf("web", 3, helmrelease.StatusPendingUpgrade))
	d := NewAdoptingDriver(mem, "web", 3)
	if err := d.Create(Key("web", 2), relOf("web", 2, helmrelease.StatusPendingUpgrade)); !errors.Is(err, ErrConflict) {
		t.Errorf("create of another key: %v", err)
	}
	if _, err := mem.Get(Key("web", 2)); !errors.Is(err, driver.ErrReleaseNotFound) {
		t.Error("the other revision reached storage")
	}
	if d.Adopted() {
		t.Error("a refused create adopted")
	}
	// The reservation is gone (taken back): adopting fails, nothing is created.
	gone := NewAdoptingDriver(driver.NewMemory(), "web", 1)
	if err := gone.Create(Key("web", 1), relOf("web", 1, helmrelease.StatusPendingInstall)); err == nil || gone.Adopted() {
		t.Errorf("adoption of a missing reservation: %v", err)
	}
}
