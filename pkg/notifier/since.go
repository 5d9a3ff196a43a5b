package notifier

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// SinceOf is a Since no later than when the notifiers first ran: the creation of
// async-helm's own namespace (own), which tenants cannot write and which holds everything
// the notifiers write, so it was there before any of them ran. Nothing async-helm deletes
// or re-makes (the election Lease, lost or deleted) moves it; a namespace made long before
// async-helm was installed only makes more of the helm CLI's past news once.
func SinceOf(ctx context.Context, c kubernetes.Interface, own string) (time.Time, error) {
	ns, err := c.CoreV1().Namespaces().Get(ctx, own, metav1.GetOptions{})
	if err != nil {
		return time.Time{}, fmt.Errorf("read async-helm's namespace %s, whose creation starts the notifiers' news: %w", own, err)
	}
	return ns.CreationTimestamp.Time, nil
}
