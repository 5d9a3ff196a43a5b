package release

import (
	"context"
	"errors"
	"fmt"

	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	helmtime "helm.sh/helm/v3/pkg/time"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"

	"github.com/async-helm/async-helm/pkg/release/storage"
	"github.com/async-helm/async-helm/pkg/wallclock"
)

// IfFailed says what MarkFailed does to a revision that is failed already.
type IfFailed bool

const (
	// KeepFailed leaves a failed revision's reason as it is.
	KeepFailed IfFailed = false
	// ReplaceFailed writes the new reason over a failed revision's (the executor's own,
	// more precise, reason over Helm's).
	ReplaceFailed IfFailed = true
)

// MarkFailed moves a pending revision to failed with the reason, as Helm records failures,
// and leaves final revisions alone (ReplaceFailed replaces a failed one's description). A
// reservation Helm never adopted becomes the record Helm would leave (failUnadopted). The
// write is conditional on the Secret read, so a record Helm writes meanwhile is never
// overwritten; a revision that no longer exists has nothing to fail.
func (s *Store) MarkFailed(ctx context.Context, namespace, name string, revision int, reason string, ifFailed IfFailed) (bool, error) {
	return s.markFailedRetrying(ctx, namespace, name, revision, reason, ifFailed, "", nil)
}

// MarkFailedSeeing is MarkFailed that also tells the status of a record it left alone (a
// final record's: what an action's outcome must agree with).
func (s *Store) MarkFailedSeeing(ctx context.Context, namespace, name string, revision int, reason string, ifFailed IfFailed) (helmrelease.Status, bool, error) {
	var seen helmrelease.Status
	done, err := s.markFailedRetrying(ctx, namespace, name, revision, reason, ifFailed, "", &seen)
	return seen, done, err
}

// MarkFailedAt is MarkFailed of rev (KeepFailed) only while its Secret is the version rev
// was read at: the notifier's sweeper decides from what it read, and a record rewritten
// since (Helm's adoption, a hand-run helm uninstall's mark) is looked at again next pass.
func (s *Store) MarkFailedAt(ctx context.Context, rev Revision, reason string) (bool, error) {
	return s.markFailedRetrying(ctx, rev.Namespace, rev.Name, rev.Version, reason, KeepFailed, rev.ResourceVersion, nil)
}

// markFailedRetrying is markFailed, read again on a conflict; atVersion, when set, is the
// only resourceVersion it fails; seen, when set, gets the status it read.
func (s *Store) markFailedRetrying(ctx context.Context, namespace, name string, revision int, reason string, ifFailed IfFailed, atVersion string, seen *helmrelease.Status) (bool, error) {
	var done bool
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		done, err = s.markFailed(ctx, namespace, name, revision, reason, ifFailed, atVersion, seen)
		return err
	})
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return done, err
}

func (s *Store) markFailed(ctx context.Context, namespace, name string, revision int, reason string, ifFailed IfFailed, atVersion string, seen *helmrelease.Status) (bool, error) {
	// Rewritten through Helm v3's types, a Helm v4 record keeps its v4 fields.
	secrets := &storage.CapturingSecrets{SecretInterface: &keepingV4Fields{SecretInterface: s.Client.CoreV1().Secrets(namespace)},
		Ctx: ctx, Conditional: true, Carry: []string{DataDeployer}}
	d := GuardedSecrets(secrets)
	rel, err := d.Get(SecretName(name, revision))
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return false, fmt.Errorf("%w: %s/%s revision %d", ErrNotFound, namespace, name, revision)
	}
	if atVersion != "" && secrets.ReadObj != nil && secrets.ReadObj.ResourceVersion != atVersion {
		return false, nil // changed since it was decided on (the write is conditional on this read)
	}
	if errors.Is(err, ErrUndecodable) && secrets.ReadObj != nil {
		// Helm could not rewrite it either: the labels say it failed (MarkUndecodable).
		return s.markUndecodable(ctx, secrets.ReadObj, reason+" (the release record does not decode)")
	}
	if err != nil {
		return false, err
	}
	st := rel.Info.Status
	if seen != nil {
		*seen = st
	}
	if !IsPending(st.String()) && !(ifFailed == ReplaceFailed && st == helmrelease.StatusFailed) {
		return false, nil
	}
	if err := s.failRecord(ctx, rel, reason); err != nil {
		return false, err
	}
	rel.Info.LastDeployed = helmtime.Time{Time: wallclock.Or(s.Clock).Now()}
	if err := d.Update(SecretName(name, revision), rel); err != nil {
		if apierrors.IsNotFound(err) {
			return false, fmt.Errorf("%w: %s/%s revision %d", ErrNotFound, namespace, name, revision)
		}
		// A conflict is retried by MarkFailed with a fresh read.
		return false, fmt.Errorf("mark %s/%s v%d failed: %w", namespace, name, revision, err)
	}
	return true, nil
}

// failRecord turns rel (pending, or failed being given a better reason) into its failure.
func (s *Store) failRecord(ctx context.Context, rel *helmrelease.Release, reason string) error {
	st := rel.Info.Status
	switch {
	case st == helmrelease.StatusUninstalling:
		// An uninstall that did not finish: the record stays (Helm left it, or never ran),
		// and says so instead of looking pending for ever. helm uninstall can finish it.
		rel.Info.Status = helmrelease.StatusFailed
		rel.Info.Description = reason
		rel.Info.Deleted = helmtime.Time{}
		delete(rel.Labels, LabelQueued)
		// No tombstone will report this one: a later hand-run helm uninstall is reported
		// from the Secret's deletion (docs/design.md).
		delete(rel.Labels, LabelAction)
	case IsPending(st.String()) && !adopted(rel):
		var base *helmrelease.Release
		if st == helmrelease.StatusPendingUpgrade || st == helmrelease.StatusPendingRollback {
			var err error
			if base, err = s.Current(ctx, rel.Namespace, rel.Name, rel.Version); errors.Is(err, ErrUndecodable) {
				// The tenant's to write: a base that does not decode must not keep a
				// never-started revision pending (and queued) for ever. The record keeps
				// the reservation's own chart and values.
				base, reason = nil, reason+"; the revision it started from does not decode"
			} else if err != nil {
				return fmt.Errorf("find the revision %s/%s v%d started from: %w", rel.Namespace, rel.Name, rel.Version, err)
			}
		}
		failUnadopted(rel, base, reason)
	default:
		rel.Info.Status = helmrelease.StatusFailed
		rel.Info.Description = reason
		delete(rel.Labels, LabelQueued) // a failed revision is no longer waiting
	}
	return nil
}

// MarkUndecodable fails a pending revision of ours whose record does not decode, in its
// labels only (status failed, queued dropped, AnnotationFailure), at the resourceVersion
// read; it reports whether it marked the revision.
func (s *Store) MarkUndecodable(ctx context.Context, rev Revision, reason string) (bool, error) {
	if !rev.Ours || !IsPending(rev.Status) {
		return false, nil
	}
	return s.patchSecret(ctx, rev.Namespace, rev.SecretName, secretPatch{ResourceVersion: rev.ResourceVersion,
		Labels:      map[string]*string{LabelStatus: ptr(string(helmrelease.StatusFailed)), LabelQueued: nil},
		Annotations: map[string]*string{AnnotationFailure: ptr(reason)}}, "mark undecodable")
}

func (s *Store) markUndecodable(ctx context.Context, sec *corev1.Secret, reason string) (bool, error) {
	rev, ok := RevisionFromMeta(sec)
	if !ok {
		return false, nil
	}
	return s.MarkUndecodable(ctx, rev, reason)
}
