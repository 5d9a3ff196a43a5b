package notifier

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/async-helm/async-helm/pkg/release"
)

// History: a record never reported, not ours and last written before the notifiers first ran
// is the helm CLI's past, not reported. Ours is always news (a tenant may rewrite modifiedAt).

// HistoryMargin is how much before Since a change still counts as news: the helm CLI dates
// modifiedAt with its own clock, and a deployment starts submit before the notifiers.
const HistoryMargin = 2 * time.Minute

// isNews decides whether a record seen for the first time, not marked as reported, is
// reported: without a Since, when ours, undated, or changed since Since less HistoryMargin.
func isNews(m *metav1.PartialObjectMetadata, since time.Time) bool {
	if since.IsZero() || ours(m) {
		return true
	}
	changed := lastChange(m)
	return changed.IsZero() || !changed.Before(since.Add(-HistoryMargin))
}

// ours reports whether m carries any async-helm label or annotation but the notifier's
// mark (marks.go): a helm-CLI record once reported stays the cluster's past.
func ours(m *metav1.PartialObjectMetadata) bool {
	for _, keys := range []map[string]string{m.Labels, m.Annotations} {
		for k := range keys {
			if strings.HasPrefix(k, ourPrefix) && k != release.AnnotationNotified && k != release.AnnotationNotifiedSig {
				return true
			}
		}
	}
	return false
}

// ourPrefix starts the key of every label and annotation async-helm writes on a record.
const ourPrefix = "async-helm.io/"

// lastChange is the latest of the Secret's creation and Helm's createdAt and modifiedAt labels.
func lastChange(m *metav1.PartialObjectMetadata) time.Time {
	t := m.CreationTimestamp.Time
	for _, label := range []string{labelCreatedAt, release.LabelModifiedAt} {
		if at, err := strconv.ParseInt(m.Labels[label], 10, 64); err == nil {
			if at := time.Unix(at, 0); at.After(t) {
				t = at
			}
		}
	}
	return t
}

// labelCreatedAt is Helm's label of a record's creation (unix seconds).
const labelCreatedAt = "createdAt"

// isHistory: key was first seen as history and has not changed since.
func (s *Service) isHistory(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.history[key]
}

// SinceOf is a Since no later than the notifiers' start: the creation of async-helm's own
// namespace, which tenants cannot write and async-helm never makes again.
func SinceOf(ctx context.Context, c kubernetes.Interface, own string) (time.Time, error) {
	ns, err := c.CoreV1().Namespaces().Get(ctx, own, metav1.GetOptions{})
	if err != nil {
		return time.Time{}, fmt.Errorf("read async-helm's namespace %s, whose creation starts the notifiers' news: %w", own, err)
	}
	return ns.CreationTimestamp.Time, nil
}
