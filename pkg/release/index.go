package release

import (
	"context"
	"fmt"

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

// RevisionIndex is the one cache of release secret metadata (labels and annotations, no
// payloads, managedFields dropped) that submit and the notifier share: one metadata
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
	x := &RevisionIndex{queued: newQueuedCounts(rule)}
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

func dropManagedFields(obj any) (any, error) {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		m.ManagedFields = nil
	}
	return obj, nil
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
