package api

import (
	"errors"
	"fmt"
)

// Remediation strategies a request may ask for after its last failed attempt (design.md).
const (
	RemediationNone      = ""
	RemediationRollback  = "rollback"
	RemediationUninstall = "uninstall"
)

// MaxRetries bounds the retries of one request: each is a Helm action and a revision.
const MaxRetries = 10

// ErrRemediation: retries or remediation the request cannot have.
var ErrRemediation = errors.New("invalid retries or remediation")

// validateRemediation checks retries and remediation; install is true for an install.
func (r *ReleaseRequest) validateRemediation(install bool) error {
	switch {
	case r.Retries < 0 || r.Retries > MaxRetries:
		return fmt.Errorf("%w: retries %d: want 0 to %d", ErrRemediation, r.Retries, MaxRetries)
	case r.Remediation != RemediationNone && r.Remediation != RemediationRollback && r.Remediation != RemediationUninstall:
		return fmt.Errorf("%w: remediation %q: want %q, %q or none", ErrRemediation, r.Remediation, RemediationRollback, RemediationUninstall)
	case install && r.Remediation == RemediationRollback:
		return fmt.Errorf("%w: remediation %q on an install: there is no revision to roll back to (use %q)",
			ErrRemediation, r.Remediation, RemediationUninstall)
	case r.Atomic && (r.Retries > 0 || r.Remediation != RemediationNone):
		return fmt.Errorf("%w: atomic is Helm's own remediation inside an attempt: ask for atomic or for retries/remediation, not both",
			ErrRemediation)
	}
	return nil
}
