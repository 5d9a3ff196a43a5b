package release

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	helmtime "helm.sh/helm/v3/pkg/time"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/util/retry"

	"github.com/async-helm/async-helm/pkg/progress"
)

// ReservedDescription is the description a reservation carries until the executor adopts it.
const ReservedDescription = "Reserved by async-helm; waiting for the executor"

// Store reads and reserves release revisions in one cluster.
type Store struct {
	Client   kubernetes.Interface
	Metadata metadata.Interface
	// Revisions, when set, answers History from a metadata informer's cache (see
	// NewRevisionIndex) instead of a LIST per request: the reservation's create stays the
	// lock, so a cache a few milliseconds behind can only turn a 201 into a 409, never the reverse.
	Revisions Indexer
	Now       func() time.Time
}

// Queued counts the reservations accepted and not started, in namespace and in total,
// from the informer cache (Store.Revisions): submit's admission bound.
func (s *Store) Queued(namespace string) (inNamespace, total int, err error) {
	if s.Revisions == nil {
		return 0, 0, nil
	}
	if c, ok := s.Revisions.(interface{ QueuedCount(string) (int, int) }); ok {
		inNamespace, total = c.QueuedCount(namespace) // kept by RevisionIndex: O(1)
		return inNamespace, total, nil
	}
	// ByIndex, not IndexKeys: client-go sorts the keys IndexKeys returns, and with
	// thousands queued that sort was 29% of submit's CPU under load (make bench's profile).
	ns, err := s.Revisions.ByIndex(QueuedIndex, namespace)
	if err != nil {
		return 0, 0, err
	}
	all, err := s.Revisions.ByIndex(QueuedIndex, queuedAll)
	return len(ns), len(all), err
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
	return progress.Decode(l.Annotations[AnnotationProgress])
}

// StoredEvent is the accepted event kept in a pending revision's secret (nil if none).
func (s *Store) StoredEvent(ctx context.Context, namespace, secretName string) ([]byte, error) {
	sec, err := s.Client.CoreV1().Secrets(namespace).Get(ctx, secretName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: %s/%s", ErrNotFound, namespace, secretName)
	}
	if err != nil {
		return nil, fmt.Errorf("read stored event of %s/%s: %w", namespace, secretName, err)
	}
	if !IsPending(sec.Labels[LabelStatus]) {
		return nil, nil
	}
	return sec.Data[DataEvent], nil
}

// Reservation is a request to reserve the next revision of a release.
type Reservation struct {
	Namespace, Name string
	Action          Action
	// Chart is the requested chart; only its metadata is stored in the reservation.
	Chart     *chart.Metadata
	Values    map[string]interface{}
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
	if cached {
		objs, err := s.Revisions.ByIndex(ReleaseIndex, namespace+"/"+name)
		if err != nil {
			return nil, err
		}
		revs := make([]Revision, 0, len(objs))
		for _, o := range objs {
			if r, ok := RevisionFromMeta(o.(metav1.Object)); ok {
				revs = append(revs, r)
			}
		}
		sort.Slice(revs, func(i, j int) bool { return revs[i].Version > revs[j].Version })
		return revs, nil
	}
	list, err := s.Metadata.Resource(SecretsResource).Namespace(namespace).List(ctx, metav1.ListOptions{LabelSelector: SelectorRelease(name)})
	if err != nil {
		return nil, fmt.Errorf("list revisions of %s/%s: %w", namespace, name, err)
	}
	revs := make([]Revision, 0, len(list.Items))
	for i := range list.Items {
		if r, ok := RevisionFromMeta(&list.Items[i]); ok {
			revs = append(revs, r)
		}
	}
	sort.Slice(revs, func(i, j int) bool { return revs[i].Version > revs[j].Version })
	return revs, nil
}

// NextRevision checks that the action may start now and returns the revision it would reserve.
func (s *Store) NextRevision(ctx context.Context, namespace, name string, action Action) (int, error) {
	rev, err := s.nextRevision(ctx, namespace, name, action, s.Revisions != nil)
	if err != nil && s.Revisions != nil {
		// A refusal must not come from a cache that lags: confirm it with the API server.
		return s.nextRevision(ctx, namespace, name, action, false)
	}
	return rev, err
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
		return revs[0].Version + 1, nil
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
	now := helmtime.Time{Time: s.now()}
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
	capture := &capturingSecrets{SecretInterface: s.Client.CoreV1().Secrets(r.Namespace), ctx: ctx,
		addLabels: map[string]string{LabelQueued: "true"}}
	if len(r.Event) > 0 {
		capture.addData = map[string][]byte{DataEvent: r.Event}
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
	return capture.created, nil
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

// Get decodes one revision with Helm's driver.
func (s *Store) Get(ctx context.Context, namespace, name string, revision int) (*helmrelease.Release, error) {
	d := driver.NewSecrets(&capturingSecrets{SecretInterface: s.Client.CoreV1().Secrets(namespace), ctx: ctx})
	rel, err := d.Get(SecretName(name, revision))
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, fmt.Errorf("%w: %s/%s revision %d", ErrNotFound, namespace, name, revision)
	}
	return rel, err
}

// MarkFailed moves a pending revision to failed with the reason, as Helm records failures.
// It leaves final revisions alone, except that overwriteFailed replaces the description of a
// failed one (Helm's "context canceled" says less than "timed out after 5m"). A revision
// Helm adopted keeps what Helm wrote; a reservation Helm never adopted becomes the record
// Helm would leave (see failUnadopted). The write is conditional on the secret being
// unchanged since it was read, so a record Helm writes meanwhile is never overwritten, and
// a revision that no longer exists (helm uninstall, an atomic install's cleanup) has
// nothing to fail.
func (s *Store) MarkFailed(ctx context.Context, namespace, name string, revision int, reason string, overwriteFailed bool) (bool, error) {
	var done bool
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		done, err = s.markFailed(ctx, namespace, name, revision, reason, overwriteFailed)
		return err
	})
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return done, err
}

func (s *Store) markFailed(ctx context.Context, namespace, name string, revision int, reason string, overwriteFailed bool) (bool, error) {
	secrets := &capturingSecrets{SecretInterface: s.Client.CoreV1().Secrets(namespace), ctx: ctx, conditional: true}
	d := driver.NewSecrets(secrets)
	rel, err := d.Get(SecretName(name, revision))
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return false, fmt.Errorf("%w: %s/%s revision %d", ErrNotFound, namespace, name, revision)
	}
	if err != nil {
		return false, err
	}
	st := rel.Info.Status
	if !IsPending(st.String()) && !(overwriteFailed && st == helmrelease.StatusFailed) {
		return false, nil
	}
	if st == helmrelease.StatusUninstalling {
		// An uninstall that did not finish: the record stays (Helm left it, or never ran),
		// and says so instead of looking pending for ever. helm uninstall can finish it.
		rel.Info.Status = helmrelease.StatusFailed
		rel.Info.Description = reason
		rel.Info.Deleted = helmtime.Time{}
		delete(rel.Labels, LabelQueued)
		// No tombstone will report this one: a later hand-run helm uninstall is reported
		// from the Secret's deletion (docs/design.md).
		delete(rel.Labels, LabelAction)
	} else if IsPending(st.String()) && !adopted(rel) {
		var base *helmrelease.Release
		if st == helmrelease.StatusPendingUpgrade || st == helmrelease.StatusPendingRollback {
			if base, err = s.Current(ctx, namespace, name, revision); err != nil {
				return false, fmt.Errorf("find the revision %s/%s v%d started from: %w", namespace, name, revision, err)
			}
		}
		failUnadopted(rel, base, reason)
	} else {
		rel.Info.Status = helmrelease.StatusFailed
		rel.Info.Description = reason
		delete(rel.Labels, LabelQueued) // a failed revision is no longer waiting
	}
	rel.Info.LastDeployed = helmtime.Time{Time: s.now()}
	if err := d.Update(SecretName(name, revision), rel); err != nil {
		if apierrors.IsNotFound(err) {
			return false, fmt.Errorf("%w: %s/%s revision %d", ErrNotFound, namespace, name, revision)
		}
		// A conflict is retried by MarkFailed with a fresh read.
		return false, fmt.Errorf("mark %s/%s v%d failed: %w", namespace, name, revision, err)
	}
	return true, nil
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// capturingSecrets gives Helm's Secrets driver (which uses context.Background) the
// caller's context, and keeps the object the API server returned from Create.
type capturingSecrets struct {
	typedcorev1.SecretInterface
	ctx     context.Context
	created *corev1.Secret
	// addLabels and addData go into the created secret beside Helm's (the reservation's
	// queued label and stored event).
	addLabels map[string]string
	addData   map[string][]byte
	// conditional makes Update carry the resourceVersion of the last Get: Helm's driver
	// writes whole objects without one, which would overwrite a concurrent write.
	conditional bool
	read        string
	// readObj and updated are the secret as last read and as last written (an uninstall
	// mark keeps both, to put the secret back when nobody will act on it).
	readObj, updated *corev1.Secret
}

// decorate adds this write's labels and data to what Helm's driver built.
func (c *capturingSecrets) decorate(s *corev1.Secret) {
	for k, v := range c.addLabels {
		s.Labels[k] = v
	}
	for k, v := range c.addData {
		s.Data[k] = v
	}
}

func (c *capturingSecrets) Create(_ context.Context, s *corev1.Secret, o metav1.CreateOptions) (*corev1.Secret, error) {
	c.decorate(s)
	out, err := c.SecretInterface.Create(c.ctx, s, o)
	c.created = out
	return out, err
}

func (c *capturingSecrets) Get(_ context.Context, name string, o metav1.GetOptions) (*corev1.Secret, error) {
	out, err := c.SecretInterface.Get(c.ctx, name, o)
	if err == nil {
		c.read = out.ResourceVersion
		c.readObj = out.DeepCopy()
	}
	return out, err
}

func (c *capturingSecrets) Update(_ context.Context, s *corev1.Secret, o metav1.UpdateOptions) (*corev1.Secret, error) {
	if c.conditional {
		s.ResourceVersion = c.read
	}
	c.decorate(s)
	out, err := c.SecretInterface.Update(c.ctx, s, o)
	c.updated = out
	return out, err
}

func (c *capturingSecrets) List(_ context.Context, o metav1.ListOptions) (*corev1.SecretList, error) {
	return c.SecretInterface.List(c.ctx, o)
}
