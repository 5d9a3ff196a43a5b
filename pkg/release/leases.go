package release

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/release/lease"
	"github.com/async-helm/async-helm/pkg/wallclock"
)

// The Store's doors to the Leases beside the release records (pkg/release/lease): the
// revisions' heartbeats and the uninstalls' tombstones.

// Alive reports whether a live executor holds the heartbeat Lease of a revision.
func (s *Store) Alive(ctx context.Context, namespace, key string) (bool, error) {
	return lease.Alive(ctx, s.Client, namespace, key, wallclock.Or(s.Clock).Now())
}

// LastSignOfLife is when an executor last showed it worked on rev: its heartbeat Lease's
// expiry, else the revision's own clock (Revision.Created). alive: a live executor holds it.
func (s *Store) LastSignOfLife(ctx context.Context, rev Revision) (since time.Time, alive bool, err error) {
	l, err := s.Client.CoordinationV1().Leases(rev.Namespace).Get(ctx, LeaseName(rev.Name, rev.Version), metav1.GetOptions{})
	switch {
	case err == nil:
		if !lease.Expired(l, wallclock.Or(s.Clock).Now()) {
			return time.Time{}, true, nil
		}
		if at := lease.ExpiresAt(l); !at.IsZero() {
			return at, false, nil
		}
	case !apierrors.IsNotFound(err):
		return time.Time{}, false, fmt.Errorf("lease of %s/%s: %w", rev.Namespace, rev.SecretName, err)
	}
	return rev.Created, false, nil
}

// DigTombstone writes the tombstone of an uninstall before Helm runs it, with the UID of the
// revision's Secret as it is now. A redriven uninstall finds its own and keeps it.
func (s *Store) DigTombstone(ctx context.Context, t lease.Tombstone) (lease.Tombstone, error) {
	// Only its UID is needed: a metadata read, not the ~100 KiB record.
	sec, err := s.Metadata.Resource(SecretsResource).Namespace(t.Namespace).Get(ctx, t.SecretName(), metav1.GetOptions{})
	if err != nil {
		return t, fmt.Errorf("read %s/%s for its tombstone: %w", t.Namespace, t.SecretName(), err)
	}
	t.SecretUID = string(sec.UID)
	return lease.DigTombstone(ctx, s.Client, t)
}

// FinishTombstone records that Helm's uninstall succeeded: the notifier reports it now.
func (s *Store) FinishTombstone(ctx context.Context, t lease.Tombstone) error {
	return lease.FinishTombstone(ctx, s.Client, t)
}

// BuryTombstone deletes a tombstone that was reported (or needs no report, or is forged),
// only as it was read (lease.BuryTombstone); ErrConflict if it changed since.
func (s *Store) BuryTombstone(ctx context.Context, t lease.Tombstone) error {
	return lease.BuryTombstone(ctx, s.Client, t)
}

// TombstonePage lists one page of namespace's tombstones from cont (lease.TombstonePage).
func (s *Store) TombstonePage(ctx context.Context, namespace, cont string) ([]lease.Tombstone, string, error) {
	return lease.TombstonePage(ctx, s.Client, namespace, cont)
}

// ReadTombstone reads the tombstone in Lease namespace/name (nil when gone, or when that
// Lease is not a tombstone).
func (s *Store) ReadTombstone(ctx context.Context, namespace, name string) (*lease.Tombstone, error) {
	return lease.ReadTombstone(ctx, s.Client, namespace, name)
}
