package release

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
)

// Indexer is what Store needs of a cache of release secret metadata (RevisionIndex, or
// any cache.Indexer with the same indexes).
type Indexer interface {
	ByIndex(indexName, indexedValue string) ([]any, error)
	IndexKeys(indexName, indexedValue string) ([]string, error)
}

// Indexes of RevisionIndex.
const (
	// ReleaseIndex indexes release secrets by "<namespace>/<release>".
	ReleaseIndex = "release"
	// QueuedIndex indexes queued reservations by namespace, and all of them under queuedAll.
	QueuedIndex = "queued"
)

const queuedAll = "*"

// RevisionIndex is the one cache of release secret metadata (the labels and annotations
// async-helm reads, no payloads, no managedFields) that submit and the notifier share: one metadata
// informer per watched namespace (one for all when none is named), indexed by release and
// by queued reservation.
type RevisionIndex struct {
	informers []cache.SharedIndexInformer
	queued    *queuedCounts
	// counted: the queued counts have seen every informer's initial list.
	counted []cache.InformerSynced
}

// IndexOptions configure a RevisionIndex.
type IndexOptions struct {
	// Namespaces to watch (none: every namespace).
	Namespaces []string
	// SealKey, when set, makes only revisions sealed with it (LabelSeal) count as queued:
	// submit passes EVENT_SIGNING_KEY, so hand-made Secrets never fill the admission bound.
	SealKey []byte
	// NamespaceShare, when set, is the most one namespace adds to the queued total
	// (QueuedCount): submit passes MAX_QUEUED_PER_NAMESPACE, so that queued records one
	// namespace keeps (its own, relabelled) cannot refuse every other namespace.
	NamespaceShare int
}

// NewRevisionIndex builds the index over namespaces (none: every namespace), counting every
// queued revision of ours, sealed or not. Run starts it.
func NewRevisionIndex(md metadata.Interface, namespaces ...string) (*RevisionIndex, error) {
	return NewRevisionIndexWith(md, IndexOptions{Namespaces: namespaces})
}

// NewRevisionIndexWith builds the index as o says. Run starts it.
func NewRevisionIndexWith(md metadata.Interface, o IndexOptions) (*RevisionIndex, error) {
	namespaces := o.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	rule := queuedRule{sealKey: o.SealKey}
	x := &RevisionIndex{queued: newQueuedCounts(rule, o.NamespaceShare)}
	for _, ns := range namespaces {
		f := metadatainformer.NewFilteredSharedInformerFactory(md, 0, ns, func(o *metav1.ListOptions) {
			o.LabelSelector = SelectorReleaseSecrets
		})
		inf := f.ForResource(SecretsResource).Informer()
		// Only labels, annotations, name and resourceVersion are needed: memory stays flat
		// whatever the payloads weigh.
		if err := inf.SetTransform(dropManagedFields); err != nil {
			return nil, err
		}
		if err := inf.AddIndexers(cache.Indexers{ReleaseIndex: byRelease, QueuedIndex: rule.index}); err != nil {
			return nil, err
		}
		reg, err := inf.AddEventHandler(x.queued.handler())
		if err != nil {
			return nil, err
		}
		x.counted = append(x.counted, reg.HasSynced)
		x.informers = append(x.informers, inf)
	}
	return x, nil
}

// maxIndexedValue caps each label and annotation value the index keeps: a tenant may write
// up to 256 KiB of annotations on every Secret with Helm's labels, and the index holds every
// one of them in submit and the notifier. async-helm's own values are far shorter.
const maxIndexedValue = 4 << 10

// indexedLabels are the labels async-helm reads from the index besides its own
// (async-helm.io/...): Helm's (RevisionFromMeta, byRelease).
var indexedLabels = map[string]bool{LabelOwner: true, LabelName: true, LabelStatus: true,
	LabelVersion: true, LabelModifiedAt: true, "createdAt": true}

const ownPrefix = "async-helm.io/"

// dropManagedFields keeps of a Secret's metadata only what the index's readers use: no
// managedFields, Helm's labels and async-helm's, async-helm's annotations, each value capped.
func dropManagedFields(obj any) (any, error) {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		m.ManagedFields = nil
		m.Labels = keepIndexed(m.Labels, func(k string) bool { return indexedLabels[k] || strings.HasPrefix(k, ownPrefix) })
		m.Annotations = keepIndexed(m.Annotations, func(k string) bool { return strings.HasPrefix(k, ownPrefix) })
	}
	return obj, nil
}

// keepIndexed is the entries of in whose key keep accepts, values cut at maxIndexedValue
// (nil when none is kept).
func keepIndexed(in map[string]string, keep func(string) bool) map[string]string {
	var out map[string]string
	for k, v := range in {
		if !keep(k) {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(in))
		}
		if len(v) > maxIndexedValue {
			v = v[:maxIndexedValue]
		}
		out[k] = v
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
	if !cache.WaitForCacheSync(ctx.Done(), append(synced, x.counted...)...) {
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

// IndexKeys lists the keys of the cached objects whose index value is indexedValue.
func (x *RevisionIndex) IndexKeys(indexName, indexedValue string) ([]string, error) {
	var out []string
	for _, inf := range x.informers {
		keys, err := inf.GetIndexer().IndexKeys(indexName, indexedValue)
		if err != nil {
			return nil, err
		}
		out = append(out, keys...)
	}
	return out, nil
}
