package release

import (
	"context"
	"fmt"
	"strings"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
)

// Indexer is what Store needs of a cache of release secret metadata (RevisionIndex, or
// any cache.Indexer with the same indexes).
type Indexer interface {
	ByIndex(indexName, indexedValue string) ([]any, error)
}

// ReleaseIndex indexes release secrets by "<namespace>/<release>" (RevisionIndex).
const ReleaseIndex = "release"

// RevisionIndex is the one cache of release secret metadata (keptMeta) that submit and the
// notifier share: a metadata informer per watched namespace (or all), indexed by release.
type RevisionIndex struct {
	informers []cache.SharedIndexInformer
}

// Watched is the namespaces named, or every namespace when none is.
func Watched(namespaces []string) []string {
	if len(namespaces) == 0 {
		return []string{metav1.NamespaceAll}
	}
	return namespaces
}

// NewRevisionIndex builds the index over namespaces (none: every namespace). Run starts it.
func NewRevisionIndex(md metadata.Interface, namespaces ...string) (*RevisionIndex, error) {
	x := &RevisionIndex{}
	for _, ns := range Watched(namespaces) {
		f := metadatainformer.NewFilteredSharedInformerFactory(md, 0, ns, func(o *metav1.ListOptions) {
			o.LabelSelector = SelectorReleaseSecrets
		})
		inf := f.ForResource(SecretsResource).Informer()
		// Only labels, annotations, name and resourceVersion are needed: memory stays flat
		// whatever the payloads weigh.
		if err := inf.SetTransform(dropManagedFields); err != nil {
			return nil, err
		}
		if err := inf.AddIndexers(cache.Indexers{ReleaseIndex: byRelease}); err != nil {
			return nil, err
		}
		x.informers = append(x.informers, inf)
	}
	return x, nil
}

// The index keeps, of each release Secret, only the keys async-helm reads, each value
// capped, at most maxIndexedBytes in all: a tenant writes any number of labels and 256 KiB
// of annotations on every Secret labelled owner=helm.
const (
	maxIndexedValue = 4 << 10
	maxIndexedBytes = 8 << 10
)

// indexedLabels and indexedAnnotations are the keys the index's readers use
// (RevisionFromMeta, byRelease, the sweeper, the notifier).
var (
	indexedLabels = []string{LabelOwner, LabelName, LabelVersion, LabelStatus, LabelRequestID,
		LabelRevision, LabelQueued, LabelAction, LabelChart, LabelModifiedAt, "createdAt"}
	indexedAnnotations = []string{AnnotationNotified, AnnotationNotifiedSig, AnnotationFailure, AnnotationDeadLettered,
		AnnotationSent, AnnotationSentAt}
)

// dropManagedFields keeps of a Secret's metadata what the index's readers use (keptMeta),
// the values many Secrets share kept once (interned): the index holds every release Secret
// of the cluster. A list's metadata, held only until it is answered, is not interned.
func dropManagedFields(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	m.TypeMeta = metav1.TypeMeta{APIVersion: intern(m.APIVersion), Kind: intern(m.Kind)}
	m.ObjectMeta = keptMetaSharing(m.ObjectMeta, intern)
	return m, nil
}

// keptMeta is what async-helm keeps of a release Secret's metadata, in the index and every
// list: its identity, and the labels and annotations its readers use, within maxIndexedBytes.
func keptMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	return keptMetaSharing(m, func(s string) string { return s })
}

// keptMetaSharing is keptMeta with the namespace and every shared value passed through share
// as it is copied (the index interns them).
func keptMetaSharing(m metav1.ObjectMeta, share func(string) string) metav1.ObjectMeta {
	budget := maxIndexedBytes
	return metav1.ObjectMeta{Name: m.Name, Namespace: share(m.Namespace), UID: m.UID,
		ResourceVersion: m.ResourceVersion, CreationTimestamp: m.CreationTimestamp,
		DeletionTimestamp: m.DeletionTimestamp,
		Labels:            keepIndexed(m.Labels, indexedLabels, &budget, share),
		Annotations:       keepIndexed(m.Annotations, indexedAnnotations, &budget, share)}
}

// unshared are the kept keys whose values are one Secret's own: interning them would
// only add an entry to the interning map.
var unshared = map[string]bool{LabelRequestID: true, AnnotationNotifiedSig: true,
	AnnotationFailure: true, AnnotationDeadLettered: true, AnnotationSentAt: true}

// intern is s kept once for every Secret that holds it (a release's name, its namespace, a
// status...), dropped once none holds it (package unique).
func intern(s string) string {
	if s == "" {
		return ""
	}
	return unique.Make(s).Value()
}

// keepIndexed is the entries of in whose key is in keep, values cut at maxIndexedValue, in
// keep's order while budget lasts (nil when none is kept; labels first: they name the
// revision), in a map sized for what it keeps; values not unshared pass through share.
func keepIndexed(in map[string]string, keep []string, budget *int, share func(string) string) map[string]string {
	n := 0
	for _, k := range keep {
		if _, ok := in[k]; ok {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	out := make(map[string]string, n)
	for _, k := range keep {
		v, ok := in[k]
		if !ok {
			continue
		}
		if len(v) > maxIndexedValue {
			v = strings.Clone(v[:maxIndexedValue]) // not a window on the tenant's whole value
		}
		if len(k)+len(v) > *budget {
			continue
		}
		*budget -= len(k) + len(v)
		if !unshared[k] {
			v = share(v)
		}
		out[k] = v
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func byRelease(obj any) ([]string, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, nil
	}
	return []string{m.GetNamespace() + "/" + m.GetLabels()[LabelName]}, nil
}

// Run starts the informers until ctx ends and waits for their first sync.
func (x *RevisionIndex) Run(ctx context.Context) error {
	synced := make([]cache.InformerSynced, 0, len(x.informers))
	for _, inf := range x.informers {
		go inf.RunWithContext(ctx)
		synced = append(synced, inf.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("cache of release secrets did not sync")
	}
	return nil
}

// AddEventHandler is told every add, update and delete of a release secret.
func (x *RevisionIndex) AddEventHandler(h cache.ResourceEventHandler) error {
	for _, inf := range x.informers {
		if _, err := inf.AddEventHandler(h); err != nil {
			return err
		}
	}
	return nil
}

// Get returns the cached metadata of the secret "<namespace>/<name>" (nil when unknown).
func (x *RevisionIndex) Get(key string) (*metav1.PartialObjectMetadata, error) {
	for _, inf := range x.informers {
		obj, ok, err := inf.GetIndexer().GetByKey(key)
		if err != nil {
			return nil, err
		}
		if ok {
			m, _ := obj.(*metav1.PartialObjectMetadata)
			return m, nil
		}
	}
	return nil, nil
}

// ByIndex lists the cached objects whose index value is indexedValue.
func (x *RevisionIndex) ByIndex(indexName, indexedValue string) ([]any, error) {
	var out []any
	for _, inf := range x.informers {
		objs, err := inf.GetIndexer().ByIndex(indexName, indexedValue)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

// RecordNamespaces names the namespaces holding release secrets the index has seen, each
// once (from the release index's values, "<namespace>/<release>": no index of its own).
func (x *RevisionIndex) RecordNamespaces() []string {
	seen := map[string]bool{}
	var out []string
	for _, inf := range x.informers {
		for _, v := range inf.GetIndexer().ListIndexFuncValues(ReleaseIndex) {
			ns, _, _ := strings.Cut(v, "/")
			if !seen[ns] {
				seen[ns] = true
				out = append(out, ns)
			}
		}
	}
	return out
}
