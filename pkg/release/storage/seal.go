package storage

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
	// failReason, once set, is the description of the revision's failure (see FailWith).
	failReason atomic.Pointer[failReason]
}

type failReason struct {
	version int
	reason  string
}

// Seal refuses every later write.
func (d *SealableDriver) Seal() { d.sealed.Store(true) }

// FailWith makes reason the description of every later write of the revision as failed,
// set before the action's context is cancelled on purpose (a user's cancel): no reader sees
// Helm's bare "context canceled" before the executor's own final write.
func (d *SealableDriver) FailWith(version int, reason string) {
	d.failReason.Store(&failReason{version: version, reason: reason})
}

// withReason is rls with the FailWith reason when it is that revision's failure.
func (d *SealableDriver) withReason(rls *helmrelease.Release) *helmrelease.Release {
	f := d.failReason.Load()
	if f == nil || rls == nil || rls.Version != f.version || rls.Info == nil || rls.Info.Status != helmrelease.StatusFailed {
		return rls
	}
	cp, info := *rls, *rls.Info
	info.Description = f.reason
	cp.Info = &info
	return &cp
}

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
	return d.Driver.Create(key, d.withReason(rls))
}

// Update is refused once sealed.
func (d *SealableDriver) Update(key string, rls *helmrelease.Release) error {
	if err := d.check(key); err != nil {
		return err
	}
	return d.Driver.Update(key, d.withReason(rls))
}

// Delete is refused once sealed.
func (d *SealableDriver) Delete(key string) (*helmrelease.Release, error) {
	if err := d.check(key); err != nil {
		return nil, err
	}
	return d.Driver.Delete(key)
}
