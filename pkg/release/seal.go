package release

import (
	"errors"
	"fmt"
	"sync/atomic"

	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
)

// ErrSealed is a write refused because the action lost the revision's lease.
var ErrSealed = errors.New("release storage sealed: this action lost the revision's lease")

// SealableDriver passes everything through until Seal; then it refuses every write. An
// action whose lease was taken over must not write the revision another executor now owns
// (Helm records its own "context canceled" failure when the action's context ends).
type SealableDriver struct {
	driver.Driver
	sealed atomic.Bool
}

// Seal refuses every later write.
func (d *SealableDriver) Seal() { d.sealed.Store(true) }

func (d *SealableDriver) check(key string) error {
	if d.sealed.Load() {
		return fmt.Errorf("%w (%s)", ErrSealed, key)
	}
	return nil
}

// Create is refused once sealed.
func (d *SealableDriver) Create(key string, rls *helmrelease.Release) error {
	if err := d.check(key); err != nil {
		return err
	}
	return d.Driver.Create(key, rls)
}

// Update is refused once sealed.
func (d *SealableDriver) Update(key string, rls *helmrelease.Release) error {
	if err := d.check(key); err != nil {
		return err
	}
	return d.Driver.Update(key, rls)
}

// Delete is refused once sealed.
func (d *SealableDriver) Delete(key string) (*helmrelease.Release, error) {
	if err := d.check(key); err != nil {
		return nil, err
	}
	return d.Driver.Delete(key)
}
