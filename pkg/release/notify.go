package release

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What the notifier does to release Secrets, each a metadata read or one merge patch
// (secretPatch): the notifier holds no Secrets client of its own.

// ReleaseMeta reads the metadata of one release Secret from the API server (nil when gone).
func (s *Store) ReleaseMeta(ctx context.Context, namespace, secretName string) (*metav1.PartialObjectMetadata, error) {
	m, err := s.Metadata.Resource(SecretsResource).Namespace(namespace).Get(ctx, secretName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s/%s: %w", namespace, secretName, err)
	}
	return m, nil
}

// MarkNotified records rev.Status as reported (AnnotationNotified) with the notifier's
// signature sig (AnnotationNotifiedSig; "" removes it), if the Secret is still at
// rev.ResourceVersion: if Helm changed it meanwhile, the new status is reported next.
func (s *Store) MarkNotified(ctx context.Context, rev Revision, sig string) error {
	var sigValue *string
	if sig != "" {
		sigValue = ptr(sig)
	}
	_, err := s.patchSecret(ctx, rev.Namespace, rev.SecretName, secretPatch{ResourceVersion: rev.ResourceVersion,
		Annotations: map[string]*string{AnnotationNotified: ptr(rev.Status), AnnotationNotifiedSig: sigValue}}, "record reported status of")
	return err
}
