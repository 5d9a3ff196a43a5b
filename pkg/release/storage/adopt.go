package storage

import (
	"fmt"
	"sync"

	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
)

// AdoptingDriver wraps Helm's storage driver so that Helm's own Install/Upgrade adopt a
// reservation: until then it is invisible to Helm's checks, and Helm's Create of the reserved
// key becomes an Update, keeping the Secret's name and UID.
type AdoptingDriver struct {
	driver.Driver
	name     string
	revision int
	key      string

	mu      sync.Mutex
	adopted bool
	// atomic allows the one rollback revision of `helm upgrade --atomic`.
	atomic bool
	// failed is set once Helm recorded the adopted revision failed.
	failed bool
	// rolledBack is set once the rollback revision was created.
	rolledBack bool
}

// NewAdoptingDriver wraps d for the reserved revision of release name.
func NewAdoptingDriver(d driver.Driver, name string, revision int) *AdoptingDriver {
	return &AdoptingDriver{Driver: d, name: name, revision: revision, key: Key(name, revision)}
}

// AllowAtomicRollback lets Helm's `upgrade --atomic` create its rollback revision: after
// Helm recorded the adopted revision failed, exactly one Create of the next revision with
// status pending-rollback passes through, as `helm upgrade --atomic` would write it.
func (d *AdoptingDriver) AllowAtomicRollback() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.atomic = true
}

// Adopted reports whether Helm wrote its release into the reservation.
func (d *AdoptingDriver) Adopted() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.adopted
}

func (d *AdoptingDriver) hidden(r *helmrelease.Release) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return !d.adopted && r.Name == d.name && r.Version == d.revision
}

// Create adopts the reservation, and refuses any other new revision: Helm computing another
// key means the history changed under us, and a second revision must never appear. The one
// exception is an atomic upgrade's rollback (AllowAtomicRollback).
func (d *AdoptingDriver) Create(key string, rls *helmrelease.Release) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.atomic && d.adopted && d.failed && !d.rolledBack && key == Key(d.name, d.revision+1) &&
		rls.Info != nil && rls.Info.Status == helmrelease.StatusPendingRollback {
		if err := d.Driver.Create(key, rls); err != nil {
			return err
		}
		d.rolledBack = true
		return nil
	}
	if key != d.key || d.adopted {
		return fmt.Errorf("%w: Helm wanted to create %s but %s is reserved", ErrConflict, key, d.key)
	}
	if err := d.Driver.Update(key, rls); err != nil {
		return fmt.Errorf("adopt reservation %s: %w", key, err)
	}
	d.adopted = true
	return nil
}

// Update notes when Helm records the adopted revision failed (an atomic upgrade rolls back next).
func (d *AdoptingDriver) Update(key string, rls *helmrelease.Release) error {
	if err := d.Driver.Update(key, rls); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.adopted && key == d.key && rls.Info != nil && rls.Info.Status == helmrelease.StatusFailed {
		d.failed = true
	}
	return nil
}

// Get hides the reservation until it is adopted.
func (d *AdoptingDriver) Get(key string) (*helmrelease.Release, error) {
	r, err := d.Driver.Get(key)
	if err == nil && d.hidden(r) {
		return nil, driver.ErrReleaseNotFound
	}
	return r, err
}

// List hides the reservation until it is adopted.
func (d *AdoptingDriver) List(filter func(*helmrelease.Release) bool) ([]*helmrelease.Release, error) {
	return d.filter(d.Driver.List(filter))
}

// Query hides the reservation until it is adopted.
func (d *AdoptingDriver) Query(labels map[string]string) ([]*helmrelease.Release, error) {
	return d.filter(d.Driver.Query(labels))
}

func (d *AdoptingDriver) filter(in []*helmrelease.Release, err error) ([]*helmrelease.Release, error) {
	if err != nil {
		return in, err
	}
	out := in[:0]
	for _, r := range in {
		if !d.hidden(r) {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		// Helm's drivers answer "not found" rather than an empty list.
		return nil, driver.ErrReleaseNotFound
	}
	return out, nil
}
