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

// History: a record the notifiers never reported, that async-helm never touched and that
// was last written before they first ran (Service.Since, SinceOf) is the cluster's past (the
// helm CLI's), not a change: it is neither reported nor marked. Records that change later
// are reported, and so is what changes while a notifier is down.
//
// A record carrying any async-helm label or annotation is always news: an update of an old
// Secret has no date the tenant cannot rewrite (Helm's modifiedAt is a label), so dating
// async-helm's own writes would let a tenant turn them into "history". A tenant adding our
// labels only makes a record news, which it can do anyway by changing it.

// HistoryMargin is how much before Since a change still counts as news: the helm CLI dates
// its writes (modifiedAt) with its own clock, and a deployment starts submit before the
// notifiers.
const HistoryMargin = 2 * time.Minute

// isNews decides whether a record seen for the first time, not marked as reported in its
// current status, is reported: always without a Since or when async-helm touched it (ours),
// else when it last changed no earlier than HistoryMargin before Since. A record that cannot
// be dated (changed is zero) is news.
func isNews(m *metav1.PartialObjectMetadata, since time.Time) bool {
	if since.IsZero() || ours(m) {
		return true
	}
	changed := lastChange(m)
	return changed.IsZero() || !changed.Before(since.Add(-HistoryMargin))
}

// ours reports whether m carries any async-helm label or annotation other than the
// notifier's mark, which says only what was reported (marks.go): a tenant writing it
// must change nothing, and a helm-CLI record once reported stays the cluster's past.
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

// lastChange is when a record of the helm CLI was last written: the latest of its Secret's
// creation (the API server's clock) and Helm's createdAt and modifiedAt labels (unix
// seconds; modifiedAt is set by every update). The labels only ever make it later.
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
