package notifier

import (
	"context"
	"fmt"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/async-helm/async-helm/pkg/release/lease"
)

// leaseCache is one informer per namespace on async-helm's Leases, shared by the tombstones, the
// progress events and the sweeper; tenants may write them: trusted only when alive.
type leaseCache struct {
	mu        sync.Mutex
	informers []cache.SharedIndexInformer
	countMu   sync.Mutex
	// kept is, by namespace, the names of the Leases cached under their own name.
	kept map[string]map[string]bool
}

// MaxLeasesPerNamespace bounds a namespace's cached Leases (a tenant may label any number as
// ours; an executor holds one per action). Past it, a Lease folds into the namespace's one
// empty overflow entry: the sweeper reads it again, QueueTombstones pages the namespace.
const MaxLeasesPerNamespace = 1024

// overflow is no Lease's name (a name has no "~").
const overflow = "~over-bound"

// informersFor starts the informers once, over namespaces.
func (c *leaseCache) informersFor(ctx context.Context, client kubernetes.Interface, namespaces []string) []cache.SharedIndexInformer {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.informers != nil {
		return c.informers
	}
	c.countMu.Lock()
	c.kept = map[string]map[string]bool{}
	c.countMu.Unlock()
	for _, ns := range namespaces {
		f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = lease.SelectorLeases }))
		inf := f.Coordination().V1().Leases().Informer()
		_ = inf.SetTransform(c.keep) // fails only once the informer runs
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: c.forget})
		c.informers = append(c.informers, inf)
		f.Start(ctx.Done())
	}
	return c.informers
}

// get is the cached Lease namespace/name (nil: none cached, or no cache).
func (c *leaseCache) get(namespace, name string) *coordinationv1.Lease {
	c.mu.Lock()
	infs := c.informers
	c.mu.Unlock()
	for _, inf := range infs {
		if obj, ok, _ := inf.GetIndexer().GetByKey(namespace + "/" + name); ok {
			l, _ := obj.(*coordinationv1.Lease)
			return l
		}
	}
	return nil
}

// list is every cached Lease and the namespaces at MaxLeasesPerNamespace; ok: there is a cache.
func (c *leaseCache) list() (out []*coordinationv1.Lease, full []string, ok bool) {
	c.mu.Lock()
	infs := c.informers
	c.mu.Unlock()
	for _, inf := range infs {
		for _, obj := range inf.GetStore().List() {
			if l, ok := obj.(*coordinationv1.Lease); ok && l.Name != overflow {
				out = append(out, l)
			}
		}
	}
	c.countMu.Lock()
	defer c.countMu.Unlock()
	for ns, names := range c.kept {
		if len(names) >= MaxLeasesPerNamespace {
			full = append(full, ns)
		}
	}
	return out, full, infs != nil
}

// keep is the informer's transform: keptLease, or past the bound the overflow entry.
func (c *leaseCache) keep(obj any) (any, error) {
	l, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return obj, nil
	}
	if !c.admit(l.Namespace, l.Name) {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: l.Namespace, Name: overflow}}, nil
	}
	return keptLease(l), nil
}

// admit counts a Lease among its namespace's cached ones: true if it is one or there is room.
func (c *leaseCache) admit(namespace, name string) bool {
	cached := c.get(namespace, name) != nil
	c.countMu.Lock()
	defer c.countMu.Unlock()
	names := c.kept[namespace]
	if !names[name] && !cached && len(names) >= MaxLeasesPerNamespace {
		return false
	}
	if names == nil {
		names = map[string]bool{}
		c.kept[namespace] = names
	}
	names[name] = true
	return true
}

// forget frees a deleted Lease's place in its namespace's count, unless it was made again.
func (c *leaseCache) forget(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	l, ok := obj.(*coordinationv1.Lease)
	if !ok || l.Name == overflow || c.get(l.Namespace, l.Name) != nil {
		return
	}
	c.countMu.Lock()
	defer c.countMu.Unlock()
	if delete(c.kept[l.Namespace], l.Name); len(c.kept[l.Namespace]) == 0 {
		delete(c.kept, l.Namespace)
	}
}

// watch tells h of every change of async-helm's Leases and waits for the first sync.
func (c *leaseCache) watch(ctx context.Context, client kubernetes.Interface, namespaces []string, h cache.ResourceEventHandler) error {
	var synced []cache.InformerSynced
	for _, inf := range c.informersFor(ctx, client, namespaces) {
		reg, err := inf.AddEventHandler(h)
		if err != nil {
			return err
		}
		synced = append(synced, reg.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("lease cache did not sync")
	}
	return nil
}

// A tenant's Lease may carry 256 KiB of metadata: the cache keeps only what its readers use,
// each value within maxLeaseValue (a longer one is dropped: a cut one would read as another).
// An executor's progress of a large release is a few KiB.
const maxLeaseValue = 16 << 10

var (
	leaseLabels = []string{lease.LabelManagedBy, lease.LabelAction, lease.LabelRelease, lease.LabelRevision,
		lease.LabelRequestID, lease.LabelChart}
	leaseAnnotations = []string{lease.AnnotationSecretUID, lease.AnnotationOutcome, lease.AnnotationProgress}
)

func keptLease(l *coordinationv1.Lease) *coordinationv1.Lease {
	return &coordinationv1.Lease{TypeMeta: l.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: l.Name, Namespace: l.Namespace, UID: l.UID, ResourceVersion: l.ResourceVersion,
			CreationTimestamp: l.CreationTimestamp, DeletionTimestamp: l.DeletionTimestamp,
			Labels: keptValues(l.Labels, leaseLabels), Annotations: keptValues(l.Annotations, leaseAnnotations)},
		Spec: coordinationv1.LeaseSpec{RenewTime: l.Spec.RenewTime, LeaseDurationSeconds: l.Spec.LeaseDurationSeconds}}
}

// keptValues is the entries of in whose key is in keep and value within maxLeaseValue.
func keptValues(in map[string]string, keep []string) map[string]string {
	var out map[string]string
	for _, k := range keep {
		if v, ok := in[k]; ok && len(v) <= maxLeaseValue {
			if out == nil {
				out = make(map[string]string, len(keep))
			}
			out[k] = v
		}
	}
	return out
}
