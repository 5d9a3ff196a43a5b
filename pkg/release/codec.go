package release

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// gzipMagic starts a gzipped payload; Helm stores older records as plain JSON.
var gzipMagic = []byte{0x1f, 0x8b, 0x08}

var gzipReaders sync.Pool

// MaxRecordBytes bounds a decoded record: the API server caps a Secret at 1 MiB, but a
// gzipped payload may expand a thousandfold (a tenant's hand-made Secret is hostile input).
const MaxRecordBytes = 64 << 20

// ErrUndecodable is a release record that is not base64 of (gzipped) JSON of a release,
// or that decodes to more than MaxRecordBytes: a hand-made or damaged Secret.
var ErrUndecodable = errors.New("release record does not decode")

// DecodeInto decodes the payload of a release secret (data "release": base64 of gzipped
// JSON, Helm's storage format) into v. A v with fewer fields than Helm's Release skips
// the rest (chart templates, files, manifest) without allocating them: listing with
// limitInfo decodes only the head of each record this way. It is the one guarded decode:
// bounded in size, every failure (even a panic) an ErrUndecodable.
func DecodeInto(data []byte, v any) error {
	return decodeInto(data, v, MaxRecordBytes)
}

func decodeInto(data []byte, v any, limit int) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: panic: %v", ErrUndecodable, r)
		}
	}()
	if len(data) == 0 {
		return fmt.Errorf("%w: no payload", ErrUndecodable)
	}
	raw := make([]byte, base64.StdEncoding.DecodedLen(len(data)))
	n, err := base64.StdEncoding.Decode(raw, data)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUndecodable, err)
	}
	raw = raw[:n]
	if bytes.HasPrefix(raw, gzipMagic) {
		if raw, err = gunzip(raw, limit); err != nil {
			return err
		}
	}
	if len(raw) > limit {
		return fmt.Errorf("%w: more than %d bytes", ErrUndecodable, limit)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%w: %w", ErrUndecodable, err)
	}
	return nil
}

// gunzip decompresses at most limit+1 bytes: one more says the record is too large.
func gunzip(raw []byte, limit int) ([]byte, error) {
	zr, _ := gzipReaders.Get().(*gzip.Reader)
	if zr == nil {
		zr = new(gzip.Reader)
	}
	defer gzipReaders.Put(zr)
	if err := zr.Reset(bytes.NewReader(raw)); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUndecodable, err)
	}
	out, err := io.ReadAll(io.LimitReader(zr, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUndecodable, err)
	}
	if len(out) > limit {
		return nil, fmt.Errorf("%w: decompresses to more than %d bytes", ErrUndecodable, limit)
	}
	return out, nil
}

// DecodeRelease decodes a whole record, and refuses one Helm's code could not use (no
// info, no chart metadata): Helm and async-helm dereference those without checking.
func DecodeRelease(data []byte) (*helmrelease.Release, error) {
	var rls helmrelease.Release
	if err := DecodeInto(data, &rls); err != nil {
		return nil, err
	}
	if rls.Info == nil || rls.Chart == nil || rls.Chart.Metadata == nil {
		return nil, fmt.Errorf("%w: no info or chart metadata", ErrUndecodable)
	}
	return &rls, nil
}

// Head is what status reports and lists need of a record: decoding only these fields
// skips the manifest, values and chart files without allocating them.
type Head struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Version   int    `json:"version"`
	Info      *struct {
		Status      string `json:"status"`
		Description string `json:"description"`
	} `json:"info"`
	Chart *struct {
		Metadata *struct {
			Name       string `json:"name"`
			Version    string `json:"version"`
			AppVersion string `json:"appVersion"`
		} `json:"metadata"`
	} `json:"chart"`
}

// ChartMeta is the head's chart name, version and app version ("" when absent).
func (h *Head) ChartMeta() (name, version, appVersion string) {
	if h.Chart == nil || h.Chart.Metadata == nil {
		return "", "", ""
	}
	m := h.Chart.Metadata
	return m.Name, m.Version, m.AppVersion
}

// Description is the head's info.description ("" when absent).
func (h *Head) Description() string {
	if h.Info == nil {
		return ""
	}
	return h.Info.Description
}

// DecodeHead decodes the head of a release secret's payload through the guarded decode.
func DecodeHead(data []byte) (Head, error) {
	var h Head
	err := DecodeInto(data, &h)
	return h, err
}

// gzipWriters reuse compressors: gzip.NewWriterLevel allocates ~1 MiB of compressor state,
// which in Helm's encoding of each reservation was 12% of submit's CPU and most of its
// garbage under load (make bench's profile).
var gzipWriters = sync.Pool{New: func() any {
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
