package notifier

import (
	"context"
	"fmt"

	helmrelease "helm.sh/helm/v3/pkg/release"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// checkVanished: a pending revision of ours whose Secret and namespace are gone can never
// finish, so "failed" is reported once; a namespace still there means a deletion on purpose.
func (s *Service) checkVanished(ctx context.Context, key string) error {
	s.mu.Lock()
	check, rev := s.vanished[key], s.gone[key]
	s.mu.Unlock()
	if !check {
		return nil
	}
	gone, err := s.namespaceGone(ctx, rev.Namespace)
	if apierrors.IsForbidden(err) {
		s.once.Warn(s.Log, "ns-forbidden", "cannot read namespaces: pending work of a deleted namespace is not reported", "error", err)
		err, gone = nil, false
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.vanished, key)
	if gone {
		rev.Failure = fmt.Sprintf("Release %q failed: namespace %q was deleted while revision %d was %s (reported by the notifier)",
			rev.Name, rev.Namespace, rev.Version, rev.Status)
		s.gone[key] = rev
		s.queueStatus(key, string(helmrelease.StatusFailed))
	} else if len(s.backlog[key]) == 0 {
		delete(s.gone, key)
	}
	return nil
}

func (s *Service) namespaceGone(ctx context.Context, namespace string) (bool, error) {
	ns, err := s.Client.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("read namespace %s: %w", namespace, err)
	}
	return ns.DeletionTimestamp != nil || ns.Status.Phase == "Terminating", nil
}
