package repos

import (
	"fmt"
	"sync/atomic"
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
	// busy: no fetch slot was free, which says nothing of the repository: never kept.
	busy bool
}

// indexCache keeps parsed indexes by Repo.cacheKey within a byte budget, least recently used
// out; an index over maxEntry is kept as an error.
type indexCache struct {
	*tenantLRU[*fetched]
	maxEntry atomic.Int64
}

func newIndexCache(budget, maxEntry int64) *indexCache {
	if budget <= 0 {
		budget = bounds.IndexCacheBytes
	}
	if maxEntry <= 0 {
		maxEntry = bounds.MaxIndexCost
	}
	c := &indexCache{tenantLRU: newTenantLRU[*fetched](budget, 0, 0)}
	c.maxEntry.Store(maxEntry)
	return c
}

// setBudget changes the bounds (0 keeps one), dropping least recently used entries to fit.
func (c *indexCache) setBudget(budget, maxEntry int64) {
	if maxEntry > 0 {
		c.maxEntry.Store(maxEntry)
	}
	c.tenantLRU.setBudget(budget)
}

// put keeps f as id's entry (a busy f leaves the entry as it is); used as tenantLRU.put.
func (c *indexCache) put(id string, f *fetched, used bool) {
	if f.busy {
		return
	}
	if max := c.maxEntry.Load(); f.err == nil && f.cost > max {
		f = &fetched{err: fmt.Errorf("its index holds about %d MiB parsed, over the cache's bound of %d MiB per repository (CHART_INDEX_MAX_BYTES)",
			f.cost>>20, max>>20), at: f.at}
	}
	c.tenantLRU.put(id, f, f.cost, used, "")
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
