package chaos

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// holders remembers every holder each Lease of a namespace had while it was watched. A
// revision's Lease names the executor running it only until another one takes it over (an
// executor starved past its Lease loses it while it still runs): a list at a kill misses
// the runs of the killed instance whose Lease had moved on before it died.
type holders struct {
	mu   sync.Mutex
	seen map[string]map[string]bool // Lease name -> holder identities
	stop context.CancelFunc
}

// watchHolders starts recording the holders of ns's Leases; stop ends it.
func watchHolders(ctx context.Context, cl kubernetes.Interface, ns string) (*holders, error) {
	ctx, cancel := context.WithCancel(ctx)
	h := &holders{seen: map[string]map[string]bool{}, stop: cancel}
	inf := informers.NewSharedInformerFactoryWithOptions(cl, 0, informers.WithNamespace(ns)).Coordination().V1().Leases().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    h.record,
		UpdateFunc: func(_, obj any) { h.record(obj) },
	}); err != nil {
		cancel()
		return nil, fmt.Errorf("watch the Leases of %s: %w", ns, err)
	}
	go inf.Run(ctx.Done())
	synced, done := context.WithTimeout(ctx, time.Minute)
	defer done()
	if !cache.WaitForCacheSync(synced.Done(), inf.HasSynced) {
		cancel()
		return nil, fmt.Errorf("watch the Leases of %s: not synced", ns)
	}
	return h, nil
}

func (h *holders) record(obj any) {
	l, ok := obj.(*coordinationv1.Lease)
	if !ok || l.Spec.HolderIdentity == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.seen[l.Name] == nil {
		h.seen[l.Name] = map[string]bool{}
	}
	h.seen[l.Name][*l.Spec.HolderIdentity] = true
}

// heldBy lists the Leases the instance name held at any time so far (holdsAs).
func (h *holders) heldBy(name string) map[string]bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]bool{}
	for lease, ids := range h.seen {
		for id := range ids {
			if holdsAs(id, name) {
				out[lease] = true
			}
		}
	}
	return out
}

// holdsAs reports whether a Lease's holder identity is the instance name: the name, or the
// name and a suffix of its own (an action's "/<random>", an elector's "_<id>").
func holdsAs(identity, name string) bool {
	return identity == name || strings.HasPrefix(identity, name+"/") || strings.HasPrefix(identity, name+"_")
}
