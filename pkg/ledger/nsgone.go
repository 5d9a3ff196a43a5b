package ledger

import (
	"k8s.io/client-go/tools/cache"
)

// Namespaces is every namespace whose entries or retained records count now.
func (b *Book) Namespaces() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for ns, t := range b.ns {
		if len(t.order.sorted) > 0 {
			out = append(out, ns)
		}
	}
	for ns := range b.retained.ns {
		if t, ok := b.ns[ns]; !ok || len(t.order.sorted) == 0 {
			out = append(out, ns)
		}
	}
	return out
}

// retainedOfMissing stops counting the retained records of the namespaces that do not
// exist, at once: a replica starts with hours of records, most of them of namespaces
// deleted since, and the namespaces' informer has listed before the ledger's watch.
func (g *nsGone) retainedOfMissing(b *Book) {
	if g == nil || !g.synced() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for ns := range b.retained.ns {
		if _, ok, err := g.store.GetByKey(ns); err == nil && !ok {
			b.retained.namespaceGone(ns)
		}
	}
}

// nsGone finds the namespaces the Book counts that no longer exist (deleted while no replica
// watched); missing at two sweeps in a row, as the namespace informer may lag the ledger's.
type nsGone struct {
	store   cache.Store
	synced  cache.InformerSynced
	missing map[string]bool
}

// sweep tells b which counted namespaces are gone.
func (g *nsGone) sweep(b *Book) {
	if g == nil || !g.synced() {
		return
	}
	next := map[string]bool{}
	for _, ns := range b.Namespaces() {
		if _, ok, err := g.store.GetByKey(ns); err != nil || ok {
			continue
		}
		if g.missing[ns] {
			b.NamespaceGone(ns)
		} else {
			next[ns] = true
		}
	}
	g.missing = next
}
