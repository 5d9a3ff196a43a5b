package repos

import (
	"container/list"
	"fmt"
	"sync"
	"time"

	"helm.sh/helm/v3/pkg/repo"

	"github.com/async-helm/async-helm/pkg/chart/bounds"
)

type fetched struct {
	index *repo.IndexFile
	err   error
	// cost estimates the bytes the parsed index holds; at is when it was fetched.
	cost int64
	at   time.Time
	// busy: no fetch slot was free (chartsource.FetchSlots); not a property of the repository, so
	// never kept.
	busy bool
}

// indexCache keeps parsed indexes by Repo.id within a byte budget, least recently used
// out, as the chart cache keeps charts: any namespace may configure repositories, and
// their indexes must not grow submit's memory without bound.
type indexCache struct {
	budget, maxEntry int64

	mu    sync.Mutex
	byID  map[string]*list.Element // of *cacheEntry
	order *list.List               // front: most recently used
	bytes int64
}

type cacheEntry struct {
	id string
	f  *fetched
}

func newIndexCache(budget, maxEntry int64) *indexCache {
	if budget <= 0 {
		budget = bounds.IndexCacheBytes
	}
	if maxEntry <= 0 {
		maxEntry = bounds.MaxIndexCost
	}
	return &indexCache{budget: budget, maxEntry: maxEntry, byID: map[string]*list.Element{}, order: list.New()}
}

// setBudget changes the bounds, dropping least recently used entries to fit.
func (c *indexCache) setBudget(budget, maxEntry int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if budget > 0 {
		c.budget = budget
	}
	if maxEntry > 0 {
		c.maxEntry = maxEntry
	}
	c.evict()
}

func (c *indexCache) evict() {
	for c.bytes > c.budget && c.order.Len() > 0 {
		c.remove(c.order.Back())
	}
}

// get is the entry of id, marked used.
func (c *indexCache) get(id string) (*fetched, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byID[id]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*cacheEntry).f, true
}

// put keeps f as id's entry (a busy f leaves the entry as it is). A used entry (front)
// stays where it is when refreshed in the background (used false): a refresh is not a use.
// An index over maxEntry is kept as an error; then the least recently used entries go
// until the cache fits its budget.
func (c *indexCache) put(id string, f *fetched, used bool) {
	if f.busy {
		return
	}
	if f.err == nil && f.cost > c.maxEntry {
		f = &fetched{err: fmt.Errorf("its index holds about %d MiB parsed, over the cache's bound of %d MiB per repository (CHART_INDEX_MAX_BYTES)",
			f.cost>>20, c.maxEntry>>20), at: f.at}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byID[id]; ok {
		c.bytes -= e.Value.(*cacheEntry).f.cost
		e.Value.(*cacheEntry).f = f
		if used {
			c.order.MoveToFront(e)
		}
	} else {
		c.byID[id] = c.order.PushFront(&cacheEntry{id: id, f: f})
	}
	c.bytes += f.cost
	c.evict()
}

// retain drops the entries whose id keep refuses (repositories that are gone).
func (c *indexCache) retain(keep func(id string) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for e := c.order.Front(); e != nil; {
		next := e.Next()
		if !keep(e.Value.(*cacheEntry).id) {
			c.remove(e)
		}
		e = next
	}
}

func (c *indexCache) remove(e *list.Element) {
	ce := e.Value.(*cacheEntry)
	c.bytes -= ce.f.cost
	delete(c.byID, ce.id)
	c.order.Remove(e)
}

// size is the bytes held and the number of entries.
func (c *indexCache) size() (int64, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes, c.order.Len()
}

// indexCost estimates the live bytes of a parsed index: its strings and a fixed overhead
// per chart version for the structs, maps and slices around them (measured: a 10 MiB
// index.yaml held about 68 MiB live, most of it per-version overhead).
func indexCost(idx *repo.IndexFile) int64 {
	const perVersion = 2 << 10
	var n int64
	for name, versions := range idx.Entries {
		n += int64(len(name))
		for _, cv := range versions {
			n += perVersion
			if cv == nil || cv.Metadata == nil {
				continue
			}
			m := cv.Metadata
			n += int64(len(m.Name) + len(m.Version) + len(m.Description) + len(m.Home) + len(m.Icon) +
				len(m.AppVersion) + len(m.KubeVersion) + len(cv.Digest))
			for _, list := range [][]string{cv.URLs, m.Sources, m.Keywords} {
				for _, s := range list {
					n += int64(len(s))
				}
			}
			for k, v := range m.Annotations {
				n += int64(len(k) + len(v))
			}
			for _, d := range m.Dependencies {
				if d != nil {
					n += 256 + int64(len(d.Name)+len(d.Version)+len(d.Repository)+len(d.Condition)+len(d.Alias))
					n += valueCost(d.Tags) + valueCost(d.ImportValues)
				}
			}
			for _, mt := range m.Maintainers {
				if mt != nil {
					n += 64 + int64(len(mt.Name)+len(mt.Email)+len(mt.URL))
				}
			}
		}
	}
	return n
}

// valueCost is about the live bytes of a decoded YAML value a tenant's index may make as
// large as it likes (a dependency's tags and import-values): 64 bytes a node beside its
// strings. Uncounted, 2 MiB of import-values held 178 MiB in a cache that counted 2 KiB.
func valueCost(v any) int64 {
	n := int64(64)
	switch x := v.(type) {
	case string:
		n += int64(len(x))
	case []string:
		for _, e := range x {
			n += 64 + int64(len(e))
		}
	case []any:
		for _, e := range x {
			n += valueCost(e)
		}
	case map[string]any:
		for k, e := range x {
			n += int64(len(k)) + valueCost(e)
		}
	}
	return n
}
