package release

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// gzipMagic starts a gzipped payload; Helm stores older records as plain JSON.
var gzipMagic = []byte{0x1f, 0x8b, 0x08}

var gzipReaders sync.Pool

// DecodeInto decodes the payload of a release secret (data "release": base64 of gzipped
// JSON, Helm's storage format) into v. A v with fewer fields than Helm's Release skips
// the rest (chart templates, files, manifest) without allocating them: listing with
// limitInfo decodes only the head of each record this way.
func DecodeInto(data []byte, v interface{}) error {
	raw := make([]byte, base64.StdEncoding.DecodedLen(len(data)))
	n, err := base64.StdEncoding.Decode(raw, data)
	if err != nil {
		return fmt.Errorf("release record: %w", err)
	}
	raw = raw[:n]
	if bytes.HasPrefix(raw, gzipMagic) {
		zr, _ := gzipReaders.Get().(*gzip.Reader)
		if zr == nil {
			zr = new(gzip.Reader)
		}
		defer gzipReaders.Put(zr)
		if err := zr.Reset(bytes.NewReader(raw)); err != nil {
			return fmt.Errorf("release record: %w", err)
		}
		if raw, err = io.ReadAll(zr); err != nil {
			return fmt.Errorf("release record: %w", err)
		}
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("release record: %w", err)
	}
	return nil
}

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
