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

	"github.com/async-helm/async-helm/pkg/kube"
	"github.com/async-helm/async-helm/pkg/release/lease"
)

// leaseCache is one informer per watched namespace on async-helm's Leases
// (lease.SelectorLeases: heartbeats and tombstones), shared by the tombstone watch, the
// progress events and the sweeper. It holds what tenants may write: a cached Lease only
// saves a call when it shows a live executor (release.AliveIn); every decision against a
// Lease that looks dead is made on the Lease read again.
type leaseCache struct {
	mu        sync.Mutex
	informers []cache.SharedIndexInformer
}

// informersFor starts the informers once, over namespaces.
func (c *leaseCache) informersFor(ctx context.Context, client kubernetes.Interface, namespaces []string) []cache.SharedIndexInformer {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.informers != nil {
		return c.informers
	}
	for _, ns := range namespaces {
		f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = lease.SelectorLeases }))
		inf := f.Coordination().V1().Leases().Informer()
		_ = inf.SetTransform(kube.DropManagedFields) // fails only once the informer runs
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

// list is every cached Lease; ok is false when there is no cache.
func (c *leaseCache) list() ([]*coordinationv1.Lease, bool) {
	c.mu.Lock()
	infs := c.informers
	c.mu.Unlock()
	var out []*coordinationv1.Lease
	for _, inf := range infs {
		for _, obj := range inf.GetStore().List() {
			if l, ok := obj.(*coordinationv1.Lease); ok {
				out = append(out, l)
			}
		}
	}
	return out, infs != nil
}

// watch tells h of every add, update and delete of async-helm's Leases in namespaces, and
// waits for the cache's first sync.
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
