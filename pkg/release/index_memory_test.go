package release

import (
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// helmCLISecretMeta is a release Secret's metadata as the API server sends it to the
// index's metadata informer for a revision the helm CLI wrote (its managedFields
// included), JSON, so that decoding it allocates what the informer's decode allocates.
func helmCLISecretMeta(ns, name string, version int, ours bool) []byte {
	labels := map[string]string{"name": name, "owner": "helm", "status": "superseded",
		"version": fmt.Sprint(version), "createdAt": "1765000000", "modifiedAt": "1765000100"}
	var annotations map[string]string
	if ours {
		labels[LabelRequestID] = fmt.Sprintf("req-%s-%d-0123456789abcdef", name, version)
		labels[LabelRevision] = fmt.Sprint(version)
		labels[LabelChart] = "tiny-0.1.0"
		labels[LabelAction] = "upgrade"
		annotations = map[string]string{AnnotationNotified: "deployed", AnnotationNotifiedSig: "v2.c2lnbmF0dXJlLW9mLXRoZS1tYXJrLTAxMjM0NTY3ODk"}
	}
	m := map[string]any{"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
		"metadata": map[string]any{"name": SecretName(name, version), "namespace": ns,
			"uid": fmt.Sprintf("6f1c2a9e-%04x-4c1d-9b7e-%012x", version, len(name)*100000+version), "resourceVersion": fmt.Sprint(1000000 + version),
			"creationTimestamp": "2026-12-06T10:00:00Z", "labels": labels, "annotations": annotations,
			"managedFields": []any{map[string]any{"manager": "helm", "operation": "Update", "apiVersion": "v1",
				"time": "2026-12-06T10:00:00Z", "fieldsType": "FieldsV1",
				"fieldsV1": map[string]any{"f:data": map[string]any{".": map[string]any{}, "f:release": map[string]any{}},
					"f:metadata": map[string]any{"f:labels": map[string]any{".": map[string]any{}, "f:createdAt": map[string]any{},
						"f:modifiedAt": map[string]any{}, "f:name": map[string]any{}, "f:owner": map[string]any{},
						"f:status": map[string]any{}, "f:version": map[string]any{}}}, "f:type": map[string]any{}}}}}}
	raw, _ := json.Marshal(m)
	return raw
}

// indexHeapPerSecret is the heap the index's store holds per release Secret once n
// Secrets' metadata are in it (10 revisions a release, 10 releases a namespace, one
// release in ten async-helm's), each decoded and transformed as the informer does.
func indexHeapPerSecret(t testing.TB, n int) float64 {
	raws := make([][]byte, n)
	for i := range raws {
		rel := i / 10
		raws[i] = helmCLISecretMeta(fmt.Sprintf("ns-%d", rel/10), fmt.Sprintf("r%d", rel), i%10+1, rel%10 == 0)
	}
	store := cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, cache.Indexers{ReleaseIndex: byRelease})
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, raw := range raws {
		m := &metav1.PartialObjectMetadata{}
		if err := json.Unmarshal(raw, m); err != nil {
			t.Fatal(err)
		}
		obj, err := dropManagedFields(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if got := len(store.ListKeys()); got != n {
		t.Fatalf("store holds %d Secrets, want %d", got, n)
	}
	runtime.KeepAlive(store)
	runtime.KeepAlive(raws) // live through both readings: only the store differs
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}

// BenchmarkIndexHeapPerSecret reports the index's heap per release Secret (B/secret): the
// figure behind submit's and the notifier's memory on a big cluster (docs/deploy.md).
func BenchmarkIndexHeapPerSecret(b *testing.B) {
	for range b.N {
		b.ReportMetric(indexHeapPerSecret(b, 20000), "B/secret")
	}
}

// The index holds every release Secret of the cluster in submit and each notifier
// (docs/deploy.md, "Memory on a big cluster"): what it keeps of each is bounded. Values
// that Secrets share (a namespace, a release's name, "helm", a status) are kept once, and
// each map is made for what it holds: 1,395 B per Secret before, 963 B after, measured here.
func TestIndexHeapPerSecret(t *testing.T) {
	const bound = 1100
	if got := indexHeapPerSecret(t, 20000); got > bound {
		t.Errorf("the index holds %.0f B per release Secret, want at most %d", got, bound)
	}
}

// What the index keeps of a Secret reads as what the Secret says: interning shares equal
// values between Secrets, and changes none.
func TestInternedIndexKeepsEveryValue(t *testing.T) {
	for _, ours := range []bool{false, true} {
		raw := helmCLISecretMeta("team-a", "web", 3, ours)
		var orig, kept metav1.PartialObjectMetadata
		if err := json.Unmarshal(raw, &orig); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &kept); err != nil {
			t.Fatal(err)
		}
		if _, err := dropManagedFields(&kept); err != nil {
			t.Fatal(err)
		}
		if kept.TypeMeta != orig.TypeMeta || kept.Name != orig.Name || kept.Namespace != orig.Namespace ||
			kept.UID != orig.UID || kept.ResourceVersion != orig.ResourceVersion || !kept.CreationTimestamp.Equal(&orig.CreationTimestamp) {
			t.Errorf("ours=%v: identity %+v %+v, want %+v %+v", ours, kept.TypeMeta, kept.ObjectMeta, orig.TypeMeta, orig.ObjectMeta)
		}
		if !reflect.DeepEqual(kept.Labels, orig.Labels) || len(kept.Annotations) != len(orig.Annotations) {
			t.Errorf("ours=%v: labels %v annotations %v, want %v %v", ours, kept.Labels, kept.Annotations, orig.Labels, orig.Annotations)
		}
		for k, v := range orig.Annotations {
			if kept.Annotations[k] != v {
				t.Errorf("ours=%v: annotation %s = %q, want %q", ours, k, kept.Annotations[k], v)
			}
		}
		want, _ := RevisionFromMeta(&orig)
		if got, ok := RevisionFromMeta(&kept); !ok || got != want {
			t.Errorf("ours=%v: revision %+v, want %+v", ours, got, want)
		}
	}
}
