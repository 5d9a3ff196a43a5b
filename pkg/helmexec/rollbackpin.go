package helmexec

import (
	"errors"
	"fmt"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

// withRollbackPin makes the one read of a rollback's target (Helm's Get of that revision,
// in `helm rollback` and in an atomic upgrade's rollback) answer only the record submit
// pinned when it accepted the request: release records are the tenant's to rewrite, and the
// executor would apply a rewritten one as the caller. A request without a pin is refused
// first (requirePin).
func withRollbackPin(req Request) Option {
	applied := &extrasByKey{} // the apply method of each record read, which the pin covers
	return func(o *configOptions) {
		withSecretsHook(secretsHook{got: applied.peek})(o)
		WithStorageWrapper(func(d storage.Driver) storage.Driver {
			return &pinnedTarget{Driver: d, name: req.Name, reserved: req.Revision, pin: req.RollbackPin, applied: applied}
		})(o)
	}
}

// ErrNoRollbackPin: a rollback or an atomic upgrade came without the pin submit always
// gives them; with none, any record, as the tenant left it, could be restored as the caller.
var ErrNoRollbackPin = errors.New("the request pins no record its rollback may restore")

// requirePin refuses a rollback or an atomic upgrade (what) without a pin, before anything runs.
func requirePin(req Request, what string) error {
	if req.RollbackPin != nil {
		return nil
	}
	return fmt.Errorf("%s %s/%s revision %d refused: %w", what, req.Namespace, req.Name, req.Revision, ErrNoRollbackPin)
}

// pinnedTarget checks every Get of a revision of the release other than the reserved one.
type pinnedTarget struct {
	storage.Driver
	name     string
	reserved int
	pin      *release.Pin
	applied  *extrasByKey
}

// Get answers the reserved revision as is, any other only if it is the pinned record.
func (p *pinnedTarget) Get(key string) (*helmrelease.Release, error) {
	rel, err := p.Driver.Get(key)
	if err != nil || key == storage.Key(p.name, p.reserved) {
		return rel, err
	}
	if p.pin == nil {
		return nil, fmt.Errorf("roll back %s to revision %d: %w", p.name, rel.Version, ErrNoRollbackPin)
	}
	if err := p.pin.Check(rel, p.applied.get(key).ApplyMethod); err != nil {
		return nil, fmt.Errorf("roll back %s to revision %d: %w", p.name, rel.Version, err)
	}
	return rel, nil
}
