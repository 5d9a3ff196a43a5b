package repos

import (
	"container/list"
	"slices"
	"sync"
)

// tenantLRU keeps values by key within a byte budget, each charged to its owners (a caller, a
// namespace): past an owner's share its own least recently used values go first, past the
// budget or maxEntries the least recently used of the first owner holding the most. Any
// namespace may configure repositories and ask for their indexes: what they cost must not
// grow submit's memory without bound, nor push out another tenant's.
type tenantLRU[V any] struct {
	budget, share int64 // share 0: none of its own
	maxEntries    int   // 0: none

	mu    sync.Mutex
	byKey map[string]*list.Element // of *tenantEntry[V]
	order *list.List               // front: most recently used
	bytes int64
	held  map[string]int64 // by owner
}

type tenantEntry[V any] struct {
	key    string
	value  V
	cost   int64
	owners []string
}

func newTenantLRU[V any](budget, share int64, maxEntries int) *tenantLRU[V] {
	return &tenantLRU[V]{budget: budget, share: share, maxEntries: maxEntries, byKey: map[string]*list.Element{},
		order: list.New(), held: map[string]int64{}}
}

// get is key's value, marked used.
func (c *tenantLRU[V]) get(key string) (v V, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[key]
	if !ok {
		return v, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*tenantEntry[V]).value, true
}

// put keeps v under key at cost, charged to owners (at least one), unless it alone passes
// the share or the budget. A value replaced keeps its place unless used (a refresh is not).
func (c *tenantLRU[V]) put(key string, v V, cost int64, used bool, owners ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[key]
	if ok {
		c.charge(e.Value.(*tenantEntry[V]), -1)
	}
	if cost > c.budget || (c.share > 0 && cost > c.share) {
		if ok {
			c.order.Remove(e)
			delete(c.byKey, key)
		}
		return
	}
	n := &tenantEntry[V]{key: key, value: v, cost: cost, owners: owners}
	switch {
	case !ok:
		c.byKey[key] = c.order.PushFront(n)
	case used:
		e.Value = n
		c.order.MoveToFront(e)
	default:
		e.Value = n
	}
	c.charge(n, 1)
	c.evict(owners)
}

// evict drops the least recently used values of owners past their share, then of the
// heaviest owners until the cache fits its budget and maxEntries.
func (c *tenantLRU[V]) evict(owners []string) {
	for _, o := range owners {
		for c.share > 0 && c.held[o] > c.share && c.evictOldestOf(o) {
		}
	}
	for c.bytes > c.budget || (c.maxEntries > 0 && c.order.Len() > c.maxEntries) {
		if !c.evictOldestOf(c.heaviest()) {
			return
		}
	}
}

// heaviest is the owner holding the most, the least recently used of equals. It reads the
// owners' totals, not the entries: a cache full of small values must not make every put a
// walk under the lock every read takes; only equal totals (or none) walk the entries.
func (c *tenantLRU[V]) heaviest() string {
	var top string
	most, equal := int64(-1), 0
	for o, h := range c.held {
		if h > most {
			top, most, equal = o, h, 1
		} else if h == most {
			equal++
		}
	}
	most = max(most, 0) // no total at all: the values left cost nothing
	for e := c.order.Back(); equal != 1 && e != nil; e = e.Prev() {
		if o := e.Value.(*tenantEntry[V]).owners[0]; c.held[o] == most {
			return o
		}
	}
	return top
}

// evictOldestOf drops the least recently used value charged to owner o.
func (c *tenantLRU[V]) evictOldestOf(o string) bool {
	for e := c.order.Back(); e != nil; e = e.Prev() {
		n := e.Value.(*tenantEntry[V])
		if slices.Contains(n.owners, o) {
			c.remove(e)
			return true
		}
	}
	return false
}

func (c *tenantLRU[V]) remove(e *list.Element) {
	n := e.Value.(*tenantEntry[V])
	c.charge(n, -1)
	delete(c.byKey, n.key)
	c.order.Remove(e)
}

func (c *tenantLRU[V]) charge(n *tenantEntry[V], sign int64) {
	c.bytes += sign * n.cost
	for _, o := range n.owners {
		if c.held[o] += sign * n.cost; c.held[o] == 0 {
			delete(c.held, o)
		}
	}
}

// retain drops the values whose key keep refuses.
func (c *tenantLRU[V]) retain(keep func(key string) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for e := c.order.Front(); e != nil; {
		next := e.Next()
		if !keep(e.Value.(*tenantEntry[V]).key) {
			c.remove(e)
		}
		e = next
	}
}

// setBudget changes the budget (0 keeps it), dropping what no longer fits.
func (c *tenantLRU[V]) setBudget(budget int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if budget > 0 {
		c.budget = budget
	}
	c.evict(nil)
}

// size is the bytes held and the number of values.
func (c *tenantLRU[V]) size() (int64, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes, c.order.Len()
}
