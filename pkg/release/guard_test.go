package release

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"strings"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// hostileRecord is a hand-made Secret with Helm's and async-helm's labels (pending, queued,
// dead-lettered) and a payload that does not decode: what a namespace editor can write.
func hostileRecord(name string, payload string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: SecretName(name, 1), Namespace: "ns",
		Labels: map[string]string{LabelOwner: OwnerHelm, LabelName: name, LabelStatus: "pending-install",
			LabelVersion: "1", LabelRevision: "1", LabelQueued: "true", LabelRequestID: "req-" + name},
		Annotations: map[string]string{AnnotationDeadLettered: "2026-12-01T10:00:00Z"}},
		Type: SecretType, Data: map[string][]byte{"release": []byte(payload)}}
}

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return []byte(base64.StdEncoding.EncodeToString(buf.Bytes()))
}

func TestDecodeRefusesWhatIsNotARecord(t *testing.T) {
	var h Head
	for name, payload := range map[string][]byte{
		"empty":       nil,
		"not base64":  []byte("garbage!"),
		"not json":    []byte(base64.StdEncoding.EncodeToString([]byte("garbage"))),
		"broken gzip": []byte(base64.StdEncoding.EncodeToString([]byte{0x1f, 0x8b, 0x08, 0, 1})),
	} {
		if err := DecodeInto(payload, &h); !isErr(err, ErrUndecodable) {
			t.Errorf("%s: got %v, want ErrUndecodable", name, err)
		}
	}
	// Valid JSON without info or chart: Helm's code would dereference nil.
	if _, err := DecodeRelease(gzipped(t, []byte(`{"name":"x"}`))); !isErr(err, ErrUndecodable) {
		t.Errorf("record without info: got %v, want ErrUndecodable", err)
	}
}

func TestDecodeBoundsTheDecompressedSize(t *testing.T) {
	big := []byte(`{"name":"` + strings.Repeat("a", 4096) + `"}`)
	var h Head
	if err := decodeInto(gzipped(t, big), &h, 1024, ""); !isErr(err, ErrUndecodable) || !strings.Contains(err.Error(), "more than 1024 bytes") {
		t.Fatalf("gzip bomb: got %v", err)
	}
	if err := decodeInto(gzipped(t, big), &h, len(big), ""); err != nil || len(h.Name) != 4096 {
		t.Fatalf("a record at the bound decodes: %v", err)
	}
	plain := []byte(base64.StdEncoding.EncodeToString(big))
	if err := decodeInto(plain, &h, 1024, ""); !isErr(err, ErrUndecodable) {
		t.Fatalf("plain record over the bound: got %v", err)
	}
	if MaxRecordBytes != 16<<20 {
		t.Fatalf("MaxRecordBytes = %d", MaxRecordBytes)
	}
}

// Helm v3.21.4's Secrets.Get dereferences nil on such a record: Store.Get panicked.
func TestStoreGetOfAnUndecodableRecordIsAnError(t *testing.T) {
	s, c, _ := newStore(t)
	if _, err := c.CoreV1().Secrets("ns").Create(ctx(t), hostileRecord("web", "garbage"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx(t), "ns", "web", 1); !isErr(err, ErrUndecodable) {
		t.Fatalf("Get: got %v, want ErrUndecodable", err)
	}
}

func TestMarkFailedOfAnUndecodableRecordMarksItsLabels(t *testing.T) {
	s, c, _ := newStore(t)
	if _, err := c.CoreV1().Secrets("ns").Create(ctx(t), hostileRecord("web", "garbage"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	done, err := s.MarkFailed(ctx(t), "ns", "web", 1, "given up", KeepFailed)
	if err != nil || !done {
		t.Fatalf("MarkFailed: %v %v", done, err)
	}
	got, err := c.CoreV1().Secrets("ns").Get(ctx(t), SecretName("web", 1), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels[LabelStatus] != "failed" || got.Labels[LabelQueued] != "" ||
		!strings.HasPrefix(got.Annotations[AnnotationFailure], "given up") {
		t.Fatalf("labels %v annotations %v", got.Labels, got.Annotations)
	}
	// Final now: a second call has nothing to do.
	if done, err := s.MarkFailed(ctx(t), "ns", "web", 1, "again", KeepFailed); done || err != nil {
		t.Fatalf("second MarkFailed: %v %v", done, err)
	}
}

func TestGuardedSecretsSkipsUndecodableRecords(t *testing.T) {
	s, c, _ := newStore(t)
	reserve(t, s, "good", ActionInstall, "req-good")
	if _, err := c.CoreV1().Secrets("ns").Create(ctx(t), hostileRecord("bad", "garbage"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := GuardedSecrets(c.CoreV1().Secrets("ns"))
	if _, err := d.Get(SecretName("bad", 1)); !isErr(err, ErrUndecodable) {
		t.Fatalf("Get: %v", err)
	}
	if _, err := d.Delete(SecretName("bad", 1)); !isErr(err, ErrUndecodable) {
		t.Fatalf("Delete: %v", err)
	}
	all, err := d.List(func(*helmrelease.Release) bool { return true })
	if err != nil || len(all) != 1 || all[0].Name != "good" {
		t.Fatalf("List: %v %v", all, err)
	}
	q, err := d.Query(map[string]string{LabelOwner: OwnerHelm, LabelStatus: "pending-install"})
	if err != nil || len(q) != 1 || q[0].Name != "good" {
		t.Fatalf("Query: %v %v", q, err)
	}
	if _, err := d.Query(map[string]string{LabelName: "bad"}); !isErr(err, driver.ErrReleaseNotFound) {
		t.Fatalf("Query of only undecodable records: %v", err)
	}
	rel, err := d.Get(SecretName("good", 1))
	if err != nil || rel.Labels[LabelRequestID] != "req-good" || rel.Labels[LabelOwner] != "" {
		t.Fatalf("Get good: %v %v", rel, err)
	}
}
