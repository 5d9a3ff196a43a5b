package release

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Heartbeat is the Lease an executor holds while it runs the action of one revision. The
// Lease has the name of the revision's secret, in the release namespace.
type Heartbeat struct {
	Client   kubernetes.Interface
	Holder   string
	Duration time.Duration
	Now      func() time.Time
}

func (h *Heartbeat) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
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

// Acquire takes the lease of a revision if it is free, expired or already ours. False
// means a live executor holds it.
func (h *Heartbeat) Acquire(ctx context.Context, namespace, key string) (bool, error) {
	leases := h.Client.CoordinationV1().Leases(namespace)
	now := metav1.NewMicroTime(h.now())
	secs := int32(h.Duration / time.Second)
	l, err := leases.Get(ctx, key, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: key, Labels: map[string]string{"app.kubernetes.io/managed-by": "async-helm"}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &h.Holder, LeaseDurationSeconds: &secs,
				AcquireTime: &now, RenewTime: &now},
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("create lease %s/%s: %w", namespace, key, err)
		}
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("get lease %s/%s: %w", namespace, key, err)
	}
	if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != h.Holder && !Expired(l, h.now()) {
		return false, nil
	}
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.AcquireTime, l.Spec.RenewTime = &h.Holder, &secs, &now, &now
	// The resourceVersion in l makes this a compare-and-swap: of two executors taking
	// over an expired lease, one gets a conflict.
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return false, fmt.Errorf("take over lease %s/%s: %w", namespace, key, err)
	}
	return true, nil
}

// Keep renews the lease until ctx ends.
func (h *Heartbeat) Keep(ctx context.Context, namespace, key string) {
	t := time.NewTicker(h.Duration / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			l, err := h.Client.CoordinationV1().Leases(namespace).Get(ctx, key, metav1.GetOptions{})
			if err != nil {
				continue
			}
			now := metav1.NewMicroTime(h.now())
			l.Spec.RenewTime = &now
			_, _ = h.Client.CoordinationV1().Leases(namespace).Update(ctx, l, metav1.UpdateOptions{})
		}
	}
}

// Release deletes the lease once the revision is final.
func (h *Heartbeat) Release(ctx context.Context, namespace, key string) error {
	err := h.Client.CoordinationV1().Leases(namespace).Delete(ctx, key, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("release lease %s/%s: %w", namespace, key, err)
	}
	return nil
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
