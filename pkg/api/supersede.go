package api

import "errors"

// ErrSupersedeInstall: only an upgrade or a rollback can take the place of a pending
// revision; an install has none to replace (docs/design.md, "Supersede").
var ErrSupersedeInstall = errors.New("supersede applies to upgrades and rollbacks, not installs")

// validateSupersede refuses supersede on an install.
func (r *ReleaseRequest) validateSupersede(install bool) error {
	if install && r.Supersede {
		return ErrSupersedeInstall
	}
	return nil
}
