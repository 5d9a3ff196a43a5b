// Package storage wraps Helm's storage driver and the Secrets client under it for
// async-helm's actions: the adopting driver (Helm's Install/Upgrade write into a
// reservation), the sealable driver (fences off an action that lost its lease), and Secrets
// clients that carry the caller's context and keep async-helm's data across Helm's rewrites.
package storage

import (
	"errors"
	"fmt"
)

// ErrConflict is a revision someone else reserved or wrote first (release.ErrConflict is
// this error: the adopting driver's refusal is the contract's conflict).
var ErrConflict = errors.New("another request reserved this revision first")

// Key is the key Helm's storage keeps one revision of a release under: the name of the
// Secret that holds it.
func Key(release string, revision int) string {
	return fmt.Sprintf("sh.helm.release.v1.%s.v%d", release, revision)
}
