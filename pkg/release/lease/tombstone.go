package lease

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/async-helm/async-helm/pkg/release/storage"
)

// An uninstall deletes every record of its release, so the executor writes a tombstone, a
// Lease of its own (not the heartbeat Lease, which a reinstall reuses), which the notifier
// reports as "uninstalled" and deletes.
const (
	// LabelAction=ActionUninstall marks the Secret an async uninstall marked, and its
	// tombstone (release.ActionUninstall is ActionUninstall).
	LabelAction     = "async-helm.io/action"
	ActionUninstall = "uninstall"
	// LabelRelease names the release of a tombstone (LabelRevision its revision).
	LabelRelease = "async-helm.io/release"
	// AnnotationSecretUID is the UID of the Secret the uninstall deletes: one of that name
	// with another UID is a release installed again since.
	AnnotationSecretUID = "async-helm.io/secret-uid"
	// AnnotationOutcome=OutcomeUninstalled: Helm's uninstall returned without error.
	AnnotationOutcome  = "async-helm.io/outcome"
	OutcomeUninstalled = "uninstalled"
)

// SelectorTombstones selects the Leases of uninstalls, which outlive the release's Secrets
// until the notifier reports "uninstalled".
const SelectorTombstones = SelectorLeases + "," + LabelAction + "=" + ActionUninstall

// Tombstone is the record of one accepted uninstall that outlives the release's Secrets.
type Tombstone struct {
	Namespace, Name string
	Revision        int
	RequestID       string
	Chart           string
	SecretUID       string
	// Done: the executor wrote that Helm's uninstall succeeded.
	Done bool

	// lease, uid and resourceVersion are the Lease as read (TombstoneFrom).
	lease, uid, resourceVersion string
}

// TombstoneName is the name of the tombstone Lease of one uninstall request.
func TombstoneName(release string, revision int, requestID string) string {
	h := sha256.Sum256([]byte(requestID)) // request ids come from events: keep the name a DNS name
	return storage.Key(release, revision) + ".uninstall-" + hex.EncodeToString(h[:6])
}

// Lease is where the tombstone lives: the Lease it was read from, else its own name.
func (t Tombstone) Lease() string {
	if t.lease != "" {
		return t.lease
	}
	return TombstoneName(t.Name, t.Revision, t.RequestID)
}

// WellNamed reports whether the tombstone sits in the Lease its labels name (TombstoneName):
// a tenant's Lease under another name with the same labels is not one.
func (t Tombstone) WellNamed() bool {
	return t.Lease() == TombstoneName(t.Name, t.Revision, t.RequestID)
}

// SecretName is the Secret of the revision the uninstall deletes.
func (t Tombstone) SecretName() string { return storage.Key(t.Name, t.Revision) }

// TombstoneFrom reads a Lease; ok is false for any Lease that is not a tombstone (one whose
// secret-uid is longer than a UID included: a tenant's, which a list would hold).
func TombstoneFrom(l *coordinationv1.Lease) (Tombstone, bool) {
	rev, err := strconv.Atoi(l.Labels[LabelRevision])
	if l.Labels[LabelManagedBy] != ManagedByUs || l.Labels[LabelAction] != ActionUninstall || err != nil || l.Labels[LabelRelease] == "" ||
		len(l.Annotations[AnnotationSecretUID]) > 64 {
		return Tombstone{}, false
	}
	return Tombstone{Namespace: l.Namespace, Name: l.Labels[LabelRelease], Revision: rev,
		RequestID: l.Labels[LabelRequestID], Chart: l.Labels[LabelChart], SecretUID: l.Annotations[AnnotationSecretUID],
		Done: l.Annotations[AnnotationOutcome] == OutcomeUninstalled, lease: l.Name, uid: string(l.UID), resourceVersion: l.ResourceVersion}, true
}

// DigTombstone writes an uninstall's tombstone before Helm runs it, with t.SecretUID (the
// revision's Secret's now); a redriven uninstall finds its own and keeps it.
func DigTombstone(ctx context.Context, client kubernetes.Interface, t Tombstone) (Tombstone, error) {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: t.Lease(),
		Labels: map[string]string{LabelManagedBy: ManagedByUs, LabelAction: ActionUninstall,
			LabelRelease: t.Name, LabelRevision: strconv.Itoa(t.Revision), LabelRequestID: t.RequestID},
		Annotations: map[string]string{AnnotationSecretUID: t.SecretUID}}}
	if t.Chart != "" {
		l.Labels[LabelChart] = t.Chart
	}
	_, err := client.CoordinationV1().Leases(t.Namespace).Create(ctx, l, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return t, fmt.Errorf("write tombstone %s/%s: %w", t.Namespace, t.Lease(), err)
	}
	return t, nil
}

// FinishTombstone records that Helm's uninstall succeeded: the notifier reports it now.
func FinishTombstone(ctx context.Context, client kubernetes.Interface, t Tombstone) error {
	_, err := client.CoordinationV1().Leases(t.Namespace).Patch(ctx, t.Lease(), types.MergePatchType,
		annotationPatch(AnnotationOutcome, OutcomeUninstalled), metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("finish tombstone %s/%s: %w", t.Namespace, t.Lease(), err)
	}
	return nil
}

// BuryTombstone deletes a tombstone that was reported (or needs no report, or is forged).
// One read from the cluster is deleted by the name it was read under, and only as it was
// read (UID and resourceVersion as preconditions): never a name recomputed from its labels.
func BuryTombstone(ctx context.Context, client kubernetes.Interface, t Tombstone) error {
	var opts metav1.DeleteOptions
	if t.uid != "" {
		uid, rv := types.UID(t.uid), t.resourceVersion
		opts.Preconditions = &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}
	}
	err := client.CoordinationV1().Leases(t.Namespace).Delete(ctx, t.Lease(), opts)
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		return fmt.Errorf("%w: tombstone %s/%s changed", storage.ErrConflict, t.Namespace, t.Lease())
	}
	return fmt.Errorf("delete tombstone %s/%s: %w", t.Namespace, t.Lease(), err)
}

// LeaseUID is the UID of the Lease the tombstone was read from ("" if not read).
func (t Tombstone) LeaseUID() string { return t.uid }

// TombstonePage lists one page (50) of namespace's tombstones ("" = all) from cont ("": the
// first), and where the next page starts ("": none): a tenant may label any number of its
// Leases as tombstones, each with 256 KiB of metadata.
func TombstonePage(ctx context.Context, client kubernetes.Interface, namespace, cont string) ([]Tombstone, string, error) {
	list, err := client.CoordinationV1().Leases(namespace).List(ctx,
		metav1.ListOptions{LabelSelector: SelectorTombstones, Limit: 50, Continue: cont})
	if err != nil {
		return nil, "", fmt.Errorf("list uninstall tombstones of %q: %w", namespace, err)
	}
	var out []Tombstone
	for i := range list.Items {
		if t, ok := TombstoneFrom(&list.Items[i]); ok {
			out = append(out, t)
		}
	}
	return out, list.Continue, nil
}

// ReadTombstone reads the tombstone in Lease namespace/lease (nil when gone, or when that
// Lease is not a tombstone).
func ReadTombstone(ctx context.Context, client kubernetes.Interface, namespace, lease string) (*Tombstone, error) {
	l, err := client.CoordinationV1().Leases(namespace).Get(ctx, lease, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read tombstone %s/%s: %w", namespace, lease, err)
	}
	t, ok := TombstoneFrom(l)
	if !ok {
		return nil, nil
	}
	return &t, nil
}
