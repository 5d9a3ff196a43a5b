package release

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReleaseSecrets lists the release secrets of namespace ("" = all) as the store's own
// identity (callers check access first).
func (s *Store) ReleaseSecrets(ctx context.Context, namespace string) ([]corev1.Secret, error) {
	list, err := s.Client.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{LabelSelector: SelectorReleaseSecrets})
	if err != nil {
		return nil, fmt.Errorf("list release secrets of %q: %w", namespace, err)
	}
	return list.Items, nil
}

// ReleaseSecret reads one release secret as the store's own identity (nil when it is gone).
func (s *Store) ReleaseSecret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	sec, err := s.Client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read release secret %s/%s: %w", namespace, name, err)
	}
	return sec, nil
}

// ReleaseMetas lists the metadata only (no payloads) of the release secrets of namespace
// ("" = all), from the API server: a list that must see what was just written.
func (s *Store) ReleaseMetas(ctx context.Context, namespace string) ([]*metav1.PartialObjectMetadata, error) {
	list, err := s.Metadata.Resource(SecretsResource).Namespace(namespace).List(ctx, metav1.ListOptions{LabelSelector: SelectorReleaseSecrets})
	if err != nil {
		return nil, fmt.Errorf("list release secrets of %q: %w", namespace, err)
	}
	out := make([]*metav1.PartialObjectMetadata, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// Head reads one record at resourceVersion (the API server answers from its watch cache,
// at that version or newer, instead of a quorum read of etcd) and decodes only its head,
// through the guarded decode. nil when the Secret is gone; ErrUndecodable when its payload
// does not decode.
func (s *Store) Head(ctx context.Context, namespace, secretName, resourceVersion string) (*Head, error) {
	sec, err := s.Client.CoreV1().Secrets(namespace).Get(ctx, secretName, metav1.GetOptions{ResourceVersion: resourceVersion})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read release record %s/%s: %w", namespace, secretName, err)
	}
	h, err := DecodeHead(sec.Data["release"])
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", namespace, secretName, err)
	}
	return &h, nil
}
