package release

import (
	"context"
	"errors"
	"fmt"
	"sort"

	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/utils/clock"

	"github.com/async-helm/async-helm/pkg/progress"
	"github.com/async-helm/async-helm/pkg/release/lease"
	"github.com/async-helm/async-helm/pkg/release/storage"
	"github.com/async-helm/async-helm/pkg/signing"
)

// Store reads and reserves release revisions in one cluster.
type Store struct {
	Client   kubernetes.Interface
	Metadata metadata.Interface
	// Revisions, when set, answers History from a metadata informer's cache (see
	// NewRevisionIndex) instead of a LIST per request: the reservation's create stays the
	// lock, so a cache a few milliseconds behind can only turn a 201 into a 409, never the reverse.
	Revisions Indexer
	// Clock dates what the Store writes and tells whether a Lease has lapsed (nil: the wall
	// clock).
	Clock clock.PassiveClock
	// SealKey seals the queued revisions this Store writes (LabelSeal): submit's
	// EVENT_SIGNING_KEY, the key its RevisionIndex verifies them with.
	SealKey signing.Key
}

// Progress is what the action of a pending revision is doing, from its Lease (nil when
// nothing is recorded: not started, or final).
func (s *Store) Progress(ctx context.Context, namespace, secretName string) (*progress.Progress, error) {
	l, err := s.Client.CoordinationV1().Leases(namespace).Get(ctx, secretName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read progress of %s/%s: %w", namespace, secretName, err)
	}
	return progress.Decode(l.Annotations[lease.AnnotationProgress])
}

// History lists the revisions of a release from secret metadata only (payloads can
// be megabytes each), newest first.
func (s *Store) History(ctx context.Context, namespace, name string) ([]Revision, error) {
	return s.history(ctx, namespace, name, s.Revisions != nil)
}

// LiveHistory is History read from the API server, never from the cache.
func (s *Store) LiveHistory(ctx context.Context, namespace, name string) ([]Revision, error) {
	return s.history(ctx, namespace, name, false)
}

func (s *Store) history(ctx context.Context, namespace, name string, cached bool) ([]Revision, error) {
	revs := []Revision{}
	if cached {
		objs, err := s.Revisions.ByIndex(ReleaseIndex, namespace+"/"+name)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if r, ok := RevisionFromMeta(o.(metav1.Object)); ok {
				revs = append(revs, r)
			}
		}
	} else {
		// In capped pages, keeping of each what the index keeps: the metadata is the tenant's.
		err := s.metaPages(ctx, namespace, SelectorRelease(name), func(list *metav1.PartialObjectMetadataList) {
			for i := range list.Items {
				m := keptMeta(list.Items[i].ObjectMeta)
				if r, ok := RevisionFromMeta(&m); ok {
					revs = append(revs, r)
				}
			}
		})
		if err != nil {
			return nil, fmt.Errorf("list revisions of %s/%s: %w", namespace, name, err)
		}
	}
	sort.Slice(revs, func(i, j int) bool { return revs[i].Version > revs[j].Version })
	return revs, nil
}

// Get decodes one revision through the guarded decode (never Helm's Secrets.Get, which
// panics on a record that does not decode): ErrUndecodable for such a record.
func (s *Store) Get(ctx context.Context, namespace, name string, revision int) (*helmrelease.Release, error) {
	rel, _, err := s.GetWithApplyMethod(ctx, namespace, name, revision)
	return rel, err
}

// GetWithApplyMethod is Get with the record's apply_method (ApplyMethod's answer), both
// from one read of its Secret: a rollback pin of two reads could digest one record's
// chart and manifest with the apply method of another written in between.
func (s *Store) GetWithApplyMethod(ctx context.Context, namespace, name string, revision int) (*helmrelease.Release, string, error) {
	d := GuardedSecrets(&storage.CapturingSecrets{SecretInterface: s.Client.CoreV1().Secrets(namespace), Ctx: ctx})
	rel, method, err := d.getRecord(SecretName(name, revision))
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, "", fmt.Errorf("%w: %s/%s revision %d", ErrNotFound, namespace, name, revision)
	}
	return rel, method, err
}
