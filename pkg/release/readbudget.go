package release

import (
	"sync"

	helmrelease "helm.sh/helm/v3/pkg/release"
)

// ReadBudget is MaxReadBytes and MaxReadNodes for one read, or for several reads together
// (SecretsDriver.Shared: one request that lists many namespaces holds at most one read's
// records, not one read's each), shared fairly by the namespaces read: while the budget is
// full, the namespace holding the largest share gives back its newest record first. A
// namespace thus keeps what it needs up to an equal share, and what one leaves the others
// may use, whichever namespace is read first.
type ReadBudget struct {
	mu    sync.Mutex
	bound readBudget
	spent readBudget
	ns    map[string]*nsRecords
}

// nsRecords are a namespace's records kept by the read, oldest first, with their costs.
type nsRecords struct {
	spent readBudget
	recs  []*helmrelease.Release
	costs []readBudget
}

// NewReadBudget is a full budget of one read.
func NewReadBudget() *ReadBudget {
	return newReadBudget(readBudget{bytes: MaxReadBytes, nodes: MaxReadNodes})
}

func newReadBudget(bound readBudget) *ReadBudget {
	return &ReadBudget{bound: bound, ns: map[string]*nsRecords{}}
}

// Kept is rels without the records the budget gave up since: emptied in place (Helm's list
// of an earlier namespace returned them), so without the info every record decoded has.
func (b *ReadBudget) Kept(rels []*helmrelease.Release) []*helmrelease.Release {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.kept(rels)
}

func (b *ReadBudget) kept(rels []*helmrelease.Release) []*helmrelease.Release {
	out := rels[:0]
	for _, r := range rels {
		if r.Info != nil {
			out = append(out, r)
		}
	}
	return out
}

// room is the bound of ns's next record: what ns does not hold of the budget, at most a
// record's; false when the budget is full and ns holds the largest share (the record would
// be the first given back).
func (b *ReadBudget) room(ns string) (readBudget, bool) {
	var mine readBudget
	if r := b.ns[ns]; r != nil {
		mine = r.spent
	}
	if b.full() && b.share(mine) >= b.share(b.largest().spent) {
		return readBudget{}, false
	}
	return b.bound.less(mine).within(), true
}

// keep counts rls (cost) to ns, then gives back the newest records of the namespace with
// the largest share until the budget is no longer over; it returns how many it gave back.
func (b *ReadBudget) keep(ns string, rls *helmrelease.Release, cost readBudget) int {
	r := b.ns[ns]
	if r == nil {
		r = &nsRecords{}
		b.ns[ns] = r
	}
	r.recs, r.costs = append(r.recs, rls), append(r.costs, cost)
	r.spent, b.spent = r.spent.plus(cost), b.spent.plus(cost)
	n := 0
	for ; b.spent.bytes > b.bound.bytes || b.spent.nodes > b.bound.nodes; n++ {
		v := b.largest()
		last := len(v.recs) - 1
		rel, c := v.recs[last], v.costs[last]
		v.recs, v.costs = v.recs[:last], v.costs[:last]
		v.spent, b.spent = v.spent.less(c), b.spent.less(c)
		*rel = helmrelease.Release{} // held by an earlier list's answer until Kept drops it
	}
	return n
}

// full says no namespace may add to the budget without another giving back.
func (b *ReadBudget) full() bool {
	return b.spent.bytes >= b.bound.bytes || b.spent.nodes >= b.bound.nodes
}

// share is how much of the budget spent is, the larger of its bytes and nodes (scaled to
// compare without division).
func (b *ReadBudget) share(spent readBudget) int {
	return max(spent.bytes*b.bound.nodes, spent.nodes*b.bound.bytes)
}

// largest is the records of the namespace holding the largest share, the last by name
// among equals (none kept: empty).
func (b *ReadBudget) largest() *nsRecords {
	best, name, bestShare := &nsRecords{}, "", -1
	for ns, r := range b.ns {
		if s := b.share(r.spent); len(r.recs) > 0 && (s > bestShare || s == bestShare && ns > name) {
			best, name, bestShare = r, ns, s
		}
	}
	return best
}
