package release

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	helmtime "helm.sh/helm/v3/pkg/time"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/release/storage"
	"github.com/async-helm/async-helm/pkg/wallclock"
)

// ReservedDescription is the description a reservation carries until the executor adopts it.
const ReservedDescription = "Reserved by async-helm; waiting for the executor"

// MaxRevision is the largest revision reserved: Helm keeps a revision in an int (32 bits on
// 32-bit platforms), and a larger version is a tenant's label, whose +1 would wrap.
const MaxRevision = math.MaxInt32

// ErrRevisionRange is a revision outside 1..MaxRevision, or a release whose next revision
// would be (409: the release's history must be cleaned up first).
var ErrRevisionRange = errors.New("revision out of range")

// NextAfter is the revision after v of release namespace/name, refused past MaxRevision.
func NextAfter(namespace, name string, v int) (int, error) {
	if v < 0 || v >= MaxRevision {
		return 0, fmt.Errorf("%w: %s/%s has revision %d; no revision past %d is reserved",
			ErrRevisionRange, namespace, name, v, MaxRevision)
	}
	return v + 1, nil
}

// Reservation is a request to reserve the next revision of a release.
type Reservation struct {
	Namespace, Name string
	Action          Action
	// Chart is the requested chart; only its metadata is stored in the reservation.
	Chart     *chart.Metadata
	Values    map[string]any
	RequestID string
	// Revision, when set, is the revision the caller expects to reserve (0: next).
	Revision int
	// Event is the signed accepted event (JSON), stored with the reservation so that the
	// work survives a lost delivery.
	Event []byte
	// Base is the revision an upgrade starts from (Store.Current): until Helm adopts the
	// reservation, it records that revision's manifest and hooks, what is in the cluster,
	// so that `helm uninstall` meanwhile removes them.
	Base *helmrelease.Release
}

// NextRevision checks that the action may start now and returns the revision it would reserve.
func (s *Store) NextRevision(ctx context.Context, namespace, name string, action Action) (int, error) {
	rev, _, err := s.CachedNextRevision(ctx, namespace, name, action)
	return rev, err
}

// CachedNextRevision is NextRevision, and says whether the revision is the cache's guess
// (Reserve may find it taken by a revision written before this read) or the API server's
// (taken then means a race). A refusal is always the API server's.
func (s *Store) CachedNextRevision(ctx context.Context, namespace, name string, action Action) (rev int, guessed bool, err error) {
	if s.Revisions == nil {
		rev, err = s.nextRevision(ctx, namespace, name, action, false)
		return rev, false, err
	}
	if rev, err = s.nextRevision(ctx, namespace, name, action, true); err == nil {
		return rev, true, nil
	}
	// A refusal must not come from a cache that lags: confirm it with the API server.
	rev, err = s.nextRevision(ctx, namespace, name, action, false)
	return rev, false, err
}

// LiveNextRevision is NextRevision read from the API server, never from the cache: the
// answer when the revision the cache guessed turned out to be taken (Reserve's ErrConflict).
func (s *Store) LiveNextRevision(ctx context.Context, namespace, name string, action Action) (int, error) {
	return s.nextRevision(ctx, namespace, name, action, false)
}

func (s *Store) nextRevision(ctx context.Context, namespace, name string, action Action, cached bool) (int, error) {
	revs, err := s.history(ctx, namespace, name, cached)
	if err != nil {
		return 0, err
	}
	// A rollback reserves the next revision exactly as an upgrade does.
	upgrade := action == ActionUpgrade || action == ActionRollback
	switch {
	case action == ActionInstall && len(revs) > 0:
		if IsPending(revs[0].Status) {
			return 0, fmt.Errorf("%w: %w", ErrNameInUse, &PendingError{Revision: revs[0].Version, Status: revs[0].Status})
		}
		return 0, fmt.Errorf("%w: %s/%s has revision %d (%s)", ErrNameInUse, namespace, name, revs[0].Version, revs[0].Status)
	case upgrade && len(revs) == 0:
		return 0, fmt.Errorf("%w: %s/%s has no revisions to %s", ErrNotFound, namespace, name, action)
	case upgrade && IsPending(revs[0].Status):
		return 0, &PendingError{Revision: revs[0].Version, Status: revs[0].Status}
	case upgrade:
		return NextAfter(namespace, name, revs[0].Version)
	}
	return 1, nil
}

// Reserve writes the pending revision as Helm's own Secrets driver writes it. Of several
// concurrent calls for one revision exactly one succeeds: the API server's create is the lock.
func (s *Store) Reserve(ctx context.Context, r Reservation) (*corev1.Secret, error) {
	rev := r.Revision
	if rev == 0 {
		var err error
		if rev, err = s.NextRevision(ctx, r.Namespace, r.Name, r.Action); err != nil {
			return nil, err
		}
	}
	if rev < 1 || rev > MaxRevision {
		// A caller's own +1 that wrapped, or a bound it did not check: never written.
		return nil, fmt.Errorf("%w: revision %d of %s/%s is not in 1..%d", ErrRevisionRange, rev, r.Namespace, r.Name, MaxRevision)
	}
	now := helmtime.Time{Time: wallclock.Or(s.Clock).Now()}
	rel := &helmrelease.Release{
		Name:      r.Name,
		Namespace: r.Namespace,
		Version:   rev,
		Chart:     &chart.Chart{Metadata: r.Chart},
		Config:    r.Values,
		Labels:    Labels(r.RequestID, rev, r.Chart.Name, r.Chart.Version),
		Info: &helmrelease.Info{
			FirstDeployed: now, LastDeployed: now,
			Status:      helmrelease.Status(r.Action.PendingStatus()),
			Description: ReservedDescription,
		},
	}
	if r.Base != nil {
		rel.Manifest, rel.Hooks, rel.Info.FirstDeployed = r.Base.Manifest, r.Base.Hooks, r.Base.Info.FirstDeployed
	}
	capture := &storage.CapturingSecrets{SecretInterface: s.Client.CoreV1().Secrets(r.Namespace), Ctx: ctx,
		AddLabels: map[string]string{LabelQueued: "true"}}
	s.sealLabels(r.Namespace, SecretName(r.Name, rev), r.RequestID, capture.AddLabels)
	if len(r.Event) > 0 {
		capture.AddData = map[string][]byte{DataEvent: r.Event}
	}
	// The record Helm's Secrets driver would create, built here to reuse the compressor
	// (see newRecord; codec_test compares the two).
	obj, err := newRecord(SecretName(r.Name, rev), rel, time.Now())
	if err != nil {
		return nil, fmt.Errorf("reserve revision %d of %s/%s: %w", rev, r.Namespace, r.Name, err)
	}
	if _, err := capture.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("%w: revision %d of %s/%s", ErrConflict, rev, r.Namespace, r.Name)
		}
		return nil, fmt.Errorf("reserve revision %d of %s/%s: %w", rev, r.Namespace, r.Name, err)
	}
	return capture.Created, nil
}

// Undo deletes a reservation nobody will work on. The UID precondition keeps it from
// deleting a newer object of the same name.
func (s *Store) Undo(ctx context.Context, sec *corev1.Secret) error {
	uid := sec.UID
	err := s.Client.CoreV1().Secrets(sec.Namespace).Delete(ctx, sec.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil {
		return fmt.Errorf("undo reservation %s/%s: %w", sec.Namespace, sec.Name, err)
	}
	return nil
}
