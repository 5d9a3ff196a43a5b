package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/async-helm/async-helm/pkg/signing"
	"github.com/async-helm/async-helm/pkg/wallclock"
)

// Heartbeat is the Lease an executor holds while it runs the action of one revision. The
// Lease has the name of the revision's secret, in the release namespace.
type Heartbeat struct {
	Client   kubernetes.Interface
	Holder   string
	Duration time.Duration
	// Clock dates the holds and renewals (nil: the wall clock). Keep's renewal ticks stay
	// on the wall clock.
	Clock clock.PassiveClock
	// CancelKey signs the cancel requests RequestCancel writes and is the only authority a
	// held Lease's cancel is honoured with (cancelsign.go; empty: unsigned, and any honoured).
	CancelKey signing.Key
}

// ExpiresAt is when the lease lapses unless renewed (zero for a lease never renewed).
func ExpiresAt(l *coordinationv1.Lease) time.Time {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)
}

// Expired reports whether nobody renewed the lease within its duration.
func Expired(l *coordinationv1.Lease, now time.Time) bool {
	return now.After(ExpiresAt(l))
}

// Hold takes the lease of a revision for one action under a holder identity of its own
// (h.Holder and a random suffix); a nil Held means a live holder has it.
func (h *Heartbeat) Hold(ctx context.Context, namespace, key string) (*Held, error) {
	return h.HoldFor(ctx, namespace, key, "")
}

// HoldFor is Hold for the action of request requestID: the only request whose cancels
// (signed for it) the Held honours.
func (h *Heartbeat) HoldFor(ctx context.Context, namespace, key, requestID string) (*Held, error) {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	held, err := h.hold(ctx, namespace, key, h.Holder+"/"+hex.EncodeToString(b))
	if held != nil {
		held.requestID = requestID
	}
	return held, err
}

func (h *Heartbeat) hold(ctx context.Context, namespace, key, holder string) (*Held, error) {
	leases := h.Client.CoordinationV1().Leases(namespace)
	now := metav1.NewMicroTime(wallclock.Or(h.Clock).Now())
	secs := int32(h.Duration / time.Second)
	l, err := leases.Get(ctx, key, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: key, Labels: map[string]string{LabelManagedBy: ManagedByUs}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs,
				AcquireTime: &now, RenewTime: &now},
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("create lease %s/%s: %w", namespace, key, err)
		}
		return &Held{h: h, namespace: namespace, holder: holder, lease: l}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get lease %s/%s: %w", namespace, key, err)
	}
	if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != holder && !Expired(l, wallclock.Or(h.Clock).Now()) {
		return nil, nil
	}
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.AcquireTime, l.Spec.RenewTime = &holder, &secs, &now, &now
	// The resourceVersion in l makes this a compare-and-swap: of two executors taking
	// over an expired lease, one gets a conflict.
	l, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("take over lease %s/%s: %w", namespace, key, err)
	}
	return &Held{h: h, namespace: namespace, holder: holder, lease: l}, nil
}

// Annotations of a revision's Lease, where Helm's rewrites of the Secret cannot erase them:
// the action's progress (progress.Progress as JSON) and who asked to cancel it (by submit).
const (
	AnnotationProgress = "async-helm.io/progress"
	AnnotationCancel   = "async-helm.io/cancel"
	// cancelHolder prefixes the holder of a Lease submit creates to fail a revision nobody runs.
	cancelHolder = "cancelled-by/"
)

// Held is a lease one action holds. Every write carries the resourceVersion last seen, so
// a lease another executor took over after it lapsed is never renewed or deleted.
type Held struct {
	h         *Heartbeat
	namespace string
	holder    string
	requestID string
	mu        sync.Mutex
	lease     *coordinationv1.Lease
}

// CancelledBy is who asked to cancel the action ("" if nobody, or if the request's
// signature does not verify), as last seen on the Lease.
func (l *Held) CancelledBy() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.h.cancelBy(l.namespace, l.lease.Name, l.requestID, l.lease.Annotations)
}

// Sync writes the annotation key=value if it changed, else re-reads the Lease, so that a
// cancel request is seen within one call. The write carries the resourceVersion: it never
// overwrites a cancel request or another holder. It reports why the lease is lost, or "".
func (l *Held) Sync(ctx context.Context, key, value string) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	leases := l.h.Client.CoordinationV1().Leases(l.namespace)
	if l.lease.Annotations[key] != value {
		next := l.lease.DeepCopy()
		if next.Annotations == nil {
			next.Annotations = map[string]string{}
		}
		next.Annotations[key] = value
		out, err := leases.Update(ctx, next, metav1.UpdateOptions{})
		if err == nil {
			l.lease = out
			return "", nil
		}
		if apierrors.IsNotFound(err) {
			return "the lease was deleted", nil
		}
		if !apierrors.IsConflict(err) {
			return "", fmt.Errorf("annotate lease %s/%s: %w", l.namespace, l.lease.Name, err)
		}
	}
	return l.reread(ctx)
}

// reread reads the Lease again: why it is lost, or "" with l.lease the copy read; l.mu is
// held.
func (l *Held) reread(ctx context.Context) (string, error) {
	cur, err := l.h.Client.CoordinationV1().Leases(l.namespace).Get(ctx, l.lease.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "the lease was deleted", nil
	}
	if err != nil {
		return "", fmt.Errorf("read lease %s/%s: %w", l.namespace, l.lease.Name, err)
	}
	if cur.Spec.HolderIdentity == nil || *cur.Spec.HolderIdentity != l.holder {
		return fmt.Sprintf("the lease was taken over by %v", ptrString(cur.Spec.HolderIdentity)), nil
	}
	l.lease = cur
	return "", nil
}

// RequestCancel asks whoever runs request requestID's revision to stop. When nobody holds
// its Lease, it takes the Lease itself (so no executor can start the revision) and reports
// running false: the caller then fails the revision and deletes the Lease with ReleaseCancel.
func (h *Heartbeat) RequestCancel(ctx context.Context, namespace, key, requestID, by string) (running bool, err error) {
	leases := h.Client.CoordinationV1().Leases(namespace)
	for i := 0; i < 3; i++ {
		held, err := h.hold(ctx, namespace, key, cancelHolder+by)
		if err != nil {
			return false, err
		}
		if held != nil {
			return false, nil
		}
		patch := annotationsPatch(h.cancelAnnotations(namespace, key, requestID, by))
		_, err = leases.Patch(ctx, key, types.MergePatchType, patch, metav1.PatchOptions{})
		if err == nil {
			return true, nil
		}
		if !apierrors.IsNotFound(err) { // deleted meanwhile: try to take it again
			return false, fmt.Errorf("request cancel of %s/%s: %w", namespace, key, err)
		}
	}
	return false, fmt.Errorf("request cancel of %s/%s: the lease kept changing", namespace, key)
}

// ReleaseCancel deletes a Lease RequestCancel took.
func (h *Heartbeat) ReleaseCancel(ctx context.Context, namespace, key, by string) error {
	l, err := h.Client.CoordinationV1().Leases(namespace).Get(ctx, key, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != cancelHolder+by {
		return nil
	}
	held := &Held{h: h, namespace: namespace, holder: cancelHolder + by, lease: l}
	return held.Release(ctx)
}

// Keep renews the lease every Duration/3 until ctx ends. When the lease is lost (deleted,
// or taken over by another holder), it calls lost once and stops.
func (l *Held) Keep(ctx context.Context, lost func(reason string)) {
	t := time.NewTicker(l.h.Duration / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if reason := l.renew(ctx); reason != "" {
				lost(reason)
				return
			}
		}
	}
}

// renew returns why the lease is lost, or "" (a transient error is retried next tick).
func (l *Held) renew(ctx context.Context) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	leases := l.h.Client.CoordinationV1().Leases(l.namespace)
	next := l.lease.DeepCopy()
	now := metav1.NewMicroTime(wallclock.Or(l.h.Clock).Now())
	next.Spec.RenewTime = &now
	out, err := leases.Update(ctx, next, metav1.UpdateOptions{})
	switch {
	case err == nil:
		l.lease = out
		return ""
	case apierrors.IsNotFound(err):
		return "the lease was deleted"
	case !apierrors.IsConflict(err):
		return ""
	}
	// Someone else wrote the lease: still ours (an annotation), or taken over?
	reason, _ := l.reread(ctx)
	return reason
}

// Release deletes the lease if this action still holds it.
func (l *Held) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	leases := l.h.Client.CoordinationV1().Leases(l.namespace)
	for i := 0; i < 3; i++ {
		rv := l.lease.ResourceVersion
		err := leases.Delete(ctx, l.lease.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		if err == nil || apierrors.IsNotFound(err) {
			return nil
		}
		if !apierrors.IsConflict(err) {
			return fmt.Errorf("release lease %s/%s: %w", l.namespace, l.lease.Name, err)
		}
		cur, err := leases.Get(ctx, l.lease.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("release lease %s/%s: %w", l.namespace, l.lease.Name, err)
		}
		if cur.Spec.HolderIdentity == nil || *cur.Spec.HolderIdentity != l.holder {
			return nil // another holder's now: not ours to delete
		}
		l.lease = cur
	}
	return fmt.Errorf("release lease %s/%s: kept conflicting", l.namespace, l.lease.Name)
}

func ptrString(s *string) string {
	if s == nil {
		return "nobody"
	}
	return *s
}

// Alive reports whether a live executor holds the lease of a revision.
func Alive(ctx context.Context, client kubernetes.Interface, namespace, key string, now time.Time) (bool, error) {
	l, err := client.CoordinationV1().Leases(namespace).Get(ctx, key, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return !Expired(l, now), nil
}
