package release

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	helmtime "helm.sh/helm/v3/pkg/time"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/release/storage"
	"github.com/async-helm/async-helm/pkg/wallclock"
)

// UninstallDescription is the description of a revision marked for uninstall until the
// executor's Helm takes over (Helm writes its own "Deletion in progress").
const UninstallDescription = "Uninstall requested via async-helm; waiting for the executor"

// UninstallMark asks for revision Revision of a release to be marked uninstalling.
type UninstallMark struct {
	Namespace, Name string
	Revision        int
	RequestID       string
	// Event is the signed accepted uninstall event (JSON), stored as a reservation stores its event.
	Event []byte
}

// Marked is a revision marked uninstalling, with the secret as it was before, so that
// Unmark can put it back when nobody will act on the mark.
type Marked struct {
	Secret *corev1.Secret
	// Release is the revision as marked (what the console's synchronous uninstall answers).
	Release  *helmrelease.Release
	previous *corev1.Secret
}

// markAttempts bounds MarkUninstalling's reads again after a write that changed no status.
const markAttempts = 3

// MarkUninstalling records an accepted uninstall on the latest revision of a release, as a
// reservation records an install (status uninstalling, this request's labels, queued, the
// stored event), through Helm's Secrets driver. The write carries the resourceVersion read:
// a concurrent write makes it ErrConflict, except one that left the status as it was (the
// notifier's mark), after which it is read and retried. A pending revision: PendingError.
func (s *Store) MarkUninstalling(ctx context.Context, m UninstallMark) (*Marked, error) {
	seen := ""
	var err error
	for range markAttempts {
		var marked *Marked
		var st string
		marked, st, err = s.markUninstallingOnce(ctx, m, seen)
		if !errors.Is(err, ErrConflict) || (seen != "" && st != seen) {
			return marked, err
		}
		seen = st
	}
	return nil, err
}

// markUninstallingOnce is one read and mark, answering the status it read; seen, when not
// empty, is an earlier attempt's: another status now is the concurrent write's conflict.
func (s *Store) markUninstallingOnce(ctx context.Context, m UninstallMark, seen string) (*Marked, string, error) {
	// modifiedAt (Helm's) is when the uninstall was accepted: the sweeper's clock for it.
	capture := &storage.CapturingSecrets{SecretInterface: s.Client.CoreV1().Secrets(m.Namespace), Ctx: ctx, Conditional: true,
		AddLabels: map[string]string{LabelQueued: "true", LabelModifiedAt: strconv.FormatInt(wallclock.Or(s.Clock).Now().Unix(), 10)},
		// The uninstall runs the record's delete hooks as the seal of who wrote them says.
		Carry: []string{DataDeployer}}
	s.sealLabels(m.Namespace, SecretName(m.Name, m.Revision), m.RequestID, capture.AddLabels)
	if len(m.Event) > 0 {
		capture.AddData = map[string][]byte{DataEvent: m.Event}
	}
	d := GuardedSecrets(capture)
	key := SecretName(m.Name, m.Revision)
	rel, err := d.Get(key)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, "", fmt.Errorf("%w: %s/%s revision %d", ErrNotFound, m.Namespace, m.Name, m.Revision)
	}
	if err != nil {
		return nil, "", fmt.Errorf("read %s/%s: %w", m.Namespace, key, err)
	}
	st := rel.Info.Status.String()
	if IsPending(st) {
		return nil, st, &PendingError{Revision: m.Revision, Status: st}
	}
	if seen != "" && st != seen {
		return nil, st, fmt.Errorf("%w: %s/%s became %s while the uninstall was being recorded", ErrConflict, m.Namespace, key, st)
	}
	if rel.Labels == nil {
		rel.Labels = map[string]string{}
	}
	// Helm keeps custom labels across its rewrites: the uninstall's request id and "ours"
	// stay while Helm marks the revision itself, as a reservation's do.
	rel.Labels[LabelRequestID] = m.RequestID
	rel.Labels[LabelRevision] = strconv.Itoa(m.Revision)
	// The executor's tombstone reports this uninstall, not the Secret's deletion.
	rel.Labels[LabelAction] = string(ActionUninstall)
	rel.Info.Status = helmrelease.StatusUninstalling
	rel.Info.Description = UninstallDescription
	rel.Info.Deleted = helmtime.Time{Time: wallclock.Or(s.Clock).Now()}
	if err := d.Update(key, rel); err != nil {
		if apierrors.IsConflict(err) {
			return nil, st, fmt.Errorf("%w: %s/%s changed while the uninstall was being recorded", ErrConflict, m.Namespace, key)
		}
		if apierrors.IsNotFound(err) {
			return nil, "", fmt.Errorf("%w: %s/%s revision %d", ErrNotFound, m.Namespace, m.Name, m.Revision)
		}
		return nil, "", fmt.Errorf("mark %s/%s uninstalling: %w", m.Namespace, key, err)
	}
	return &Marked{Secret: capture.Updated, Release: rel, previous: capture.ReadObj}, st, nil
}

// Unmark puts a revision marked uninstalling back as it was, unless it changed since the
// mark (then the stored event is the record of the work, and the sweeper re-sends it).
func (s *Store) Unmark(ctx context.Context, m *Marked) error {
	back := m.previous.DeepCopy()
	back.ResourceVersion = m.Secret.ResourceVersion
	_, err := s.Client.CoreV1().Secrets(back.Namespace).Update(ctx, back, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("undo uninstall mark of %s/%s: %w", back.Namespace, back.Name, err)
	}
	return nil
}
