package release

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// A null entry in a list Helm ranges over made Helm dereference nil (a rollback onto
// `"hooks":[null]` killed the executor): the guarded decode refuses it.
func TestDecodeReleaseRefusesNullEntries(t *testing.T) {
	const head = `"name":"web","namespace":"ns","version":1,"info":{"status":"superseded"}`
	md := `"name":"tiny","version":"1.0.0","apiVersion":"v2"`
	for where, js := range map[string]string{
		"hooks":                       `{` + head + `,"chart":{"metadata":{` + md + `}},"hooks":[null]}`,
		"chart.templates":             `{` + head + `,"chart":{"metadata":{` + md + `},"templates":[null]}}`,
		"chart.files":                 `{` + head + `,"chart":{"metadata":{` + md + `},"files":[{"name":"a"},null]}}`,
		"chart.metadata.dependencies": `{` + head + `,"chart":{"metadata":{` + md + `,"dependencies":[null]}}}`,
		"chart.metadata.maintainers":  `{` + head + `,"chart":{"metadata":{` + md + `,"maintainers":[null]}}}`,
		"chart.lock.dependencies":     `{` + head + `,"chart":{"metadata":{` + md + `},"lock":{"dependencies":[null]}}}`,
	} {
		if _, err := DecodeRelease(gzipped(t, []byte(js))); !isErr(err, ErrUndecodable) || !strings.Contains(err.Error(), where) {
			t.Errorf("null entry in %s: got %v, want ErrUndecodable naming it", where, err)
		}
	}
	ok := `{` + head + `,"chart":{"metadata":{` + md + `},"templates":[{"name":"t"}]},"hooks":[{"name":"h"}]}`
	if _, err := DecodeRelease(gzipped(t, []byte(ok))); err != nil {
		t.Errorf("a record without null entries: %v", err)
	}
}

// withTrailer rewrites the decompressed size a gzipped payload announces (ISIZE).
func withTrailer(t *testing.T, payload []byte, size uint32) []byte {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(string(payload))
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint32(raw[len(raw)-4:], size)
	return []byte(base64.StdEncoding.EncodeToString(raw))
}

// A payload whose trailer announces more than the bound is refused before anything is
// decompressed; one whose trailer understates its size is refused at the announced size
// (so the trailer cannot make a decode take more memory than it was given).
func TestDecodeHoldsAGzipToItsTrailer(t *testing.T) {
	big := []byte(`{"name":"` + strings.Repeat("a", 4096) + `"}`)
	var h Head
	err := decodeInto(withTrailer(t, gzipped(t, big), MaxRecordBytes+1), &h, MaxRecordBytes, "")
	if !isErr(err, ErrUndecodable) || !isErr(err, errTooLarge) {
		t.Fatalf("trailer over the bound: got %v", err)
	}
	err = decodeInto(withTrailer(t, gzipped(t, big), 1024), &h, MaxRecordBytes, "")
	if !isErr(err, ErrUndecodable) || !strings.Contains(err.Error(), "more than its gzip trailer's 1024 bytes") {
		t.Fatalf("trailer under the size: got %v", err)
	}
	if err := decodeInto(gzipped(t, big), &h, MaxRecordBytes, ""); err != nil || len(h.Name) != 4096 {
		t.Fatalf("a true trailer: %v", err)
	}
}

// records serves n release records of web (version 1..n), each payload as given.
type records struct {
	typedcorev1.SecretInterface
	payloads [][]byte
}

func (r records) List(context.Context, metav1.ListOptions) (*corev1.SecretList, error) {
	l := &corev1.SecretList{}
	for i, p := range r.payloads {
		l.Items = append(l.Items, corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: SecretName("web", i+1), Namespace: "ns",
			Labels: map[string]string{LabelOwner: OwnerHelm, LabelName: "web", LabelStatus: "superseded", LabelVersion: fmt.Sprint(i + 1)}},
			Type: SecretType, Data: map[string][]byte{"release": p}})
	}
	return l, nil
}

// MaxRecordBytes bounds one record, but Helm keeps every record one List or Query
// returns: the decoded records of one read add up to MaxReadBytes at most, the rest are
// skipped with one log line (four 79 KiB Secrets kept 240 MiB).
func TestOneReadKeepsRecordsUpToItsBudget(t *testing.T) {
	var payloads [][]byte
	size := 0 // of each decoded record (one digit of version: all the same)
	for v := 1; v <= 5; v++ {
		js := fmt.Sprintf(`{"name":"web","namespace":"ns","version":%d,"info":{"status":"superseded"},`+
			`"chart":{"metadata":{"name":"tiny","version":"1.0.0"}},"manifest":"%s"}`, v, strings.Repeat("a", 1000))
		size = len(js)
		payloads = append(payloads, gzipped(t, []byte(js)))
	}
	d := GuardedSecrets(records{payloads: payloads})
	var logged []string
	d.Log = func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }
	rels, err := d.readWithin(SelectorReleaseSecrets, &ReadBudget{bound: readBudget{bytes: 3*size + size/2, nodes: MaxReadNodes}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rels) != 3 || rels[2].Version != 3 {
		t.Fatalf("kept %d records, want the first 3", len(rels))
	}
	if len(logged) != 1 || !strings.Contains(logged[0], "skipping 2 release records") {
		t.Errorf("logged %q, want one line for the 2 records skipped", logged)
	}
	if all, err := d.List(func(*helmrelease.Release) bool { return true }); err != nil || len(all) != 5 {
		t.Errorf("List within MaxReadBytes kept %d records (%v), want 5", len(all), err)
	}
	if MaxReadBytes != 4*MaxRecordBytes || MaxRecordBytes != 16<<20 {
		t.Errorf("MaxReadBytes %d, MaxRecordBytes %d", MaxReadBytes, MaxRecordBytes)
	}
}

// Head decodes hold their decoded bytes from one process-wide budget (the notifier's
// parallel workers each decoded a whole payload: four 79 KiB Secrets peaked at +555 MiB):
// with the budget taken, a head decode waits, and it goes on once bytes are given back.
func TestHeadDecodesWaitForTheirShareOfTheBudget(t *testing.T) {
	payload := gzipped(t, []byte(`{"name":"web","version":1,"info":{"status":"failed","description":"x"},"manifest":"`+strings.Repeat("a", 1<<20)+`"}`))
	all := 4 * MaxRecordBytes
	inFlight.take("", all)
	done := make(chan error, 1)
	go func() {
		h, err := decodeHead(payload, "")
		if err == nil && h.Description() != "x" {
			err = fmt.Errorf("head %+v", h)
		}
		done <- err
	}()
	select {
	case err := <-done:
		inFlight.give("", all)
		t.Fatalf("a head decode went on with no budget left: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	inFlight.give("", all)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	inFlight.take("", all) // every share was given back
	inFlight.give("", all)
}

// The index keeps Helm's labels and async-helm's labels and annotations, values capped;
// a tenant's other metadata (up to 256 KiB of annotations per Secret) is dropped.
func TestIndexKeepsOnlyTheMetadataAsyncHelmReads(t *testing.T) {
	long := strings.Repeat("x", 10<<10)
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns",
		Labels: map[string]string{LabelOwner: OwnerHelm, LabelName: "web", LabelStatus: "deployed", LabelVersion: "2",
			LabelModifiedAt: "1", "createdAt": "1", LabelQueued: "true", "team": "a"},
		Annotations:   map[string]string{AnnotationFailure: long, AnnotationNotified: "deployed", "kubectl.kubernetes.io/last-applied-configuration": long},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}}}
	if _, err := dropManagedFields(m); err != nil {
		t.Fatal(err)
	}
	if len(m.Labels) != 7 || m.Labels["team"] != "" || m.Labels[LabelQueued] != "true" || m.Labels[LabelVersion] != "2" {
		t.Errorf("labels %v", m.Labels)
	}
	if len(m.Annotations) != 2 || len(m.Annotations[AnnotationFailure]) != maxIndexedValue || m.Annotations[AnnotationNotified] != "deployed" {
		t.Errorf("annotations: %d kept, failure %d bytes", len(m.Annotations), len(m.Annotations[AnnotationFailure]))
	}
	if m.ManagedFields != nil {
		t.Error("managedFields kept")
	}
	if _, ok := RevisionFromMeta(m); !ok {
		t.Error("the kept metadata is no longer a revision")
	}
}

// A tenant's Secret labelled owner=helm may carry any number of async-helm.io/ labels and
// 256 KiB of async-helm.io/ annotations, plus owner references and finalizers: the index
// keeps only the keys async-helm reads, within maxIndexedBytes.
func TestIndexBoundsWhatItKeepsOfOneSecret(t *testing.T) {
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: SecretName("web", 2), Namespace: "ns",
		Labels: map[string]string{LabelOwner: OwnerHelm, LabelName: "web", LabelStatus: "deployed", LabelVersion: "2"},
		Annotations: map[string]string{AnnotationNotified: "deployed", AnnotationFailure: strings.Repeat("f", 10<<10),
			AnnotationSentAt: strings.Repeat("s", 4<<10), AnnotationDeadLettered: strings.Repeat("d", 4<<10)}}}
	for i := range 3000 {
		m.Labels[fmt.Sprintf("%sl-%d", ownPrefixForTest, i)] = strings.Repeat("v", 63)
		m.Finalizers = append(m.Finalizers, fmt.Sprintf("example.com/f-%d", i))
		m.OwnerReferences = append(m.OwnerReferences, metav1.OwnerReference{Name: strings.Repeat("o", 253)})
	}
	for i := range 60 {
		m.Annotations[fmt.Sprintf("%sa-%d", ownPrefixForTest, i)] = strings.Repeat("a", 4<<10)
	}
	obj, err := dropManagedFields(m)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) > maxIndexedBytes+1<<10 {
		t.Errorf("the index keeps %d bytes of one Secret's metadata, want at most %d", len(kept), maxIndexedBytes+1<<10)
	}
	rev, ok := RevisionFromMeta(obj.(metav1.Object))
	if !ok || rev.Name != "web" || rev.Version != 2 || rev.Notified != "deployed" || rev.Status != "deployed" {
		t.Errorf("the kept metadata lost the revision: %+v, %v", rev, ok)
	}
}

const ownPrefixForTest = "async-helm.io/"
