package release

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// An uninstall deletes every record of its release, so "uninstalled" cannot be read from a
// Secret: the revision's Lease is kept as its tombstone until the notifier has reported it
// (docs/design.md, "Uninstall and rollback").
const (
	// LabelAction=uninstall marks the Secret an async uninstall marked, and the Lease its
	// executor holds.
	LabelAction = "async-helm.io/action"
	// AnnotationOutcome=OutcomeUninstalled: Helm's uninstall returned without error.
	AnnotationOutcome  = "async-helm.io/outcome"
	OutcomeUninstalled = "uninstalled"
)

// TagUninstall labels the held Lease as the tombstone-to-be of an uninstall, before Helm
// runs: request id and chart are what the "uninstalled" event will say.
func (l *Held) TagUninstall(ctx context.Context, requestID, chart string) error {
	return l.rewrite(ctx, func(lease *coordinationv1.Lease) {
		if lease.Labels == nil {
			lease.Labels = map[string]string{}
		}
		lease.Labels[LabelAction] = string(ActionUninstall)
		lease.Labels[LabelRequestID] = requestID
		if chart != "" {
			lease.Labels[LabelChart] = chart
		}
	})
}

// Retire ends the hold of a finished uninstall: the Lease stays, as its tombstone, with
// the outcome written and no holder.
func (l *Held) Retire(ctx context.Context) error {
	return l.rewrite(ctx, func(lease *coordinationv1.Lease) {
		if lease.Annotations == nil {
			lease.Annotations = map[string]string{}
		}
		lease.Annotations[AnnotationOutcome] = OutcomeUninstalled
		delete(lease.Annotations, AnnotationProgress)
		lease.Spec.HolderIdentity = nil
	})
}

// rewrite updates the Lease while this action holds it: a compare-and-swap, retried
// after a conflict only while the Lease is still ours (a renewal or cancel request wrote it).
func (l *Held) rewrite(ctx context.Context, change func(*coordinationv1.Lease)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	leases := l.h.Client.CoordinationV1().Leases(l.namespace)
	for i := 0; i < 3; i++ {
		next := l.lease.DeepCopy()
		change(next)
		out, err := leases.Update(ctx, next, metav1.UpdateOptions{})
		if err == nil {
			l.lease = out
			return nil
		}
		if !apierrors.IsConflict(err) {
			return fmt.Errorf("update lease %s/%s: %w", l.namespace, l.lease.Name, err)
		}
		cur, err := leases.Get(ctx, l.lease.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("read lease %s/%s: %w", l.namespace, l.lease.Name, err)
		}
		if cur.Spec.HolderIdentity == nil || *cur.Spec.HolderIdentity != l.holder {
			return fmt.Errorf("lease %s/%s: taken over by %s", l.namespace, l.lease.Name, ptrString(cur.Spec.HolderIdentity))
		}
		l.lease = cur
	}
	return fmt.Errorf("update lease %s/%s: kept conflicting", l.namespace, l.lease.Name)
}

// Tombstone is an uninstall's Lease as the notifier reads it.
type Tombstone struct {
	Namespace, Name string
	Revision        int
	RequestID       string
	Chart           string
	// Done: the executor wrote that Helm's uninstall succeeded. Abandoned: nobody holds
	// the Lease any more and it says nothing (its executor died).
	Done, Abandoned      bool
	uid, resourceVersion string
}

// SecretName is the Secret of the revision the tombstone is for.
func (t Tombstone) SecretName() string { return SecretName(t.Name, t.Revision) }

// TombstoneFrom reads a Lease; ok is false for any Lease that is not an uninstall's.
func TombstoneFrom(l *coordinationv1.Lease, now time.Time) (Tombstone, bool) {
	name, rev, named := ParseSecretName(l.Name)
	if !named || l.Labels[LabelManagedBy] != ManagedByUs || l.Labels[LabelAction] != string(ActionUninstall) {
		return Tombstone{}, false
	}
	t := Tombstone{Namespace: l.Namespace, Name: name, Revision: rev, RequestID: l.Labels[LabelRequestID],
		Chart: l.Labels[LabelChart], uid: string(l.UID), resourceVersion: l.ResourceVersion}
	t.Done = l.Annotations[AnnotationOutcome] == OutcomeUninstalled
	t.Abandoned = !t.Done && (l.Spec.HolderIdentity == nil || Expired(l, now))
	return t, true
}

// Bury deletes a tombstone that was reported (or is moot), only as it was read: a Lease
// taken over meanwhile (a redriven uninstall) is left alone and ErrConflict is returned.
func Bury(ctx context.Context, client kubernetes.Interface, t Tombstone) error {
	uid, rv := types.UID(t.uid), t.resourceVersion
	err := client.CoordinationV1().Leases(t.Namespace).Delete(ctx, t.SecretName(),
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		return fmt.Errorf("%w: tombstone %s/%s changed", ErrConflict, t.Namespace, t.SecretName())
	}
	return fmt.Errorf("delete tombstone %s/%s: %w", t.Namespace, t.SecretName(), err)
}
