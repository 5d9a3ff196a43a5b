package release

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"

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

// gzipWriters reuse compressors: gzip.NewWriterLevel allocates ~1 MiB of compressor state,
// which in Helm's encoding of each reservation was 12% of submit's CPU and most of its
// garbage under load (make bench's profile).
var gzipWriters = sync.Pool{New: func() interface{} {
	w, _ := gzip.NewWriterLevel(nil, gzip.BestCompression)
	return w
}}

// EncodeRelease is Helm's encoding of a release record (Helm v3's storage/driver
// encodeRelease: JSON, gzipped at BestCompression, base64), byte for byte, with the
// compressor reused.
func EncodeRelease(rls *helmrelease.Release) ([]byte, error) {
	b, err := json.Marshal(rls)
	if err != nil {
		return nil, fmt.Errorf("encode release %s: %w", rls.Name, err)
	}
	var buf bytes.Buffer
	zw := gzipWriters.Get().(*gzip.Writer)
	defer gzipWriters.Put(zw)
	zw.Reset(&buf)
	if _, err := zw.Write(b); err != nil {
		return nil, fmt.Errorf("encode release %s: %w", rls.Name, err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("encode release %s: %w", rls.Name, err)
	}
	out := make([]byte, base64.StdEncoding.EncodedLen(buf.Len()))
	base64.StdEncoding.Encode(out, buf.Bytes())
	return out, nil
}

// newRecord is the Secret Helm's Secrets driver creates for rls under key (Helm v3's
// Secrets.Create and newSecretsObject: the release's own labels, createdAt, then name,
// owner, status and version; type helm.sh/release.v1; data "release").
func newRecord(key string, rls *helmrelease.Release, now time.Time) (*corev1.Secret, error) {
	data, err := EncodeRelease(rls)
	if err != nil {
		return nil, err
	}
	labels := make(map[string]string, len(rls.Labels)+5)
	for k, v := range rls.Labels {
		labels[k] = v
	}
	labels["createdAt"] = strconv.FormatInt(now.Unix(), 10)
	labels[LabelName], labels[LabelOwner] = rls.Name, OwnerHelm
	labels[LabelStatus], labels[LabelVersion] = rls.Info.Status.String(), strconv.Itoa(rls.Version)
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: key, Labels: labels}, Type: SecretType,
		Data: map[string][]byte{"release": data}}, nil
}
