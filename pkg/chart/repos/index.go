package repos

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/repo"

	"github.com/async-helm/async-helm/pkg/chart/bounds"
	chartref "github.com/async-helm/async-helm/pkg/chart/ref"
)

// WarningAnnotation is the annotation of the merged index that lists the repositories that
// could not be read, as the console names it: a JSON list of {"name", "error"}.
const WarningAnnotation = "console-warning"

// InvalidRepo is one entry of WarningAnnotation.
type InvalidRepo struct {
	Name  string `json:"name"`
	Error string `json:"error"`
}

// overwrites: the console hides the entries of the old Red Hat repository name when the
// new one lists the same chart.
var overwrites = map[string]string{"openshift-helm-charts": "redhat-helm-repo"}

// Index is the merged index namespace sees ("": the administrators' only), from the cache
// (a repository not fetched yet is fetched now): every enabled repository's charts keyed
// "<chart>--<repo>", newest first, no library charts, and with onlyCompatible only the
// versions whose kubeVersion the cluster meets.
func (s *Set) Index(ctx context.Context, namespace string, onlyCompatible bool) (*repo.IndexFile, error) {
	parts, err := s.parts(ctx, namespace)
	if err != nil {
		return nil, err
	}
	return s.merge(parts, onlyCompatible)
}

// part is one enabled repository of a namespace and its cached index.
type part struct {
	r Repo
	f *fetched
}

// parts are namespace's enabled repositories with their indexes.
func (s *Set) parts(ctx context.Context, namespace string) ([]part, error) {
	select {
	case <-s.refreshed:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	var out []part
	for _, r := range s.Repos(ctx, namespace) {
		if r.Disabled {
			continue
		}
		f := s.cachedIndex(ctx, r)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("index of namespace %q: %w", namespace, err) // the caller left
		}
		out = append(out, part{r: r, f: f})
	}
	return out, nil
}

// merge builds the merged index of parts (Index).
func (s *Set) merge(parts []part, onlyCompatible bool) (*repo.IndexFile, error) {
	out := repo.NewIndexFile()
	var invalid []InvalidRepo
	var hidden []string
	for _, p := range parts {
		r, f := p.r, p.f
		if f.err != nil {
			invalid = append(invalid, InvalidRepo{Name: r.Name, Error: f.err.Error()})
			continue
		}
		for name, versions := range f.index.Entries {
			var kept repo.ChartVersions
			for _, cv := range versions {
				if cv == nil || cv.Metadata == nil || cv.Type == "library" {
					continue
				}
				if onlyCompatible && cv.KubeVersion != "" && s.KubeVersion != "" && !chartutil.IsCompatibleRange(cv.KubeVersion, s.KubeVersion) {
					continue
				}
				kept = append(kept, cv)
			}
			if len(kept) == 0 {
				continue
			}
			if old, ok := overwrites[r.Name]; ok {
				hidden = append(hidden, chartref.IndexEntry(name, old))
			}
			out.Entries[chartref.IndexEntry(name, r.Name)] = kept
		}
	}
	for _, k := range hidden {
		delete(out.Entries, k)
	}
	out.SortEntries()
	if len(invalid) > 0 {
		sort.Slice(invalid, func(i, j int) bool { return invalid[i].Name < invalid[j].Name })
		b, err := json.Marshal(invalid)
		if err != nil {
			return nil, err
		}
		out.Annotations = map[string]string{WarningAnnotation: string(b)}
	}
	return out, nil
}

// cachedIndex is a repository's index from the cache, fetched now on a miss (one fetch a
// key, the flight's, not the request's: a request whose ctx ends returns at once); a project
// repository's index older than Refresh is answered, then fetched again.
func (s *Set) cachedIndex(ctx context.Context, r Repo) *fetched {
	key := r.cacheKey()
	if f, ok := s.indexes.get(key); ok {
		if r.Scope == ScopeProject && s.now().Sub(f.at) > s.refreshEvery() {
			s.refetch(ctx, r)
		}
		return f
	}
	flight := s.flights.DoChan(key, func() (any, error) {
		f := s.boundedFetch(context.WithoutCancel(ctx), r)
		s.indexes.put(key, f, true) // before the flight ends: a later miss finds it
		return f, nil
	})
	select {
	case res := <-flight:
		return res.Val.(*fetched)
	case <-ctx.Done():
		return &fetched{err: fmt.Errorf("index of chart repository %q: %w", r.Name, ctx.Err()), at: s.now()}
	}
}

// boundedFetch is a flight's fetch in a fetch slot, waited for within bounds.IndexFetchTime
// (no request ends the flight); one that found no slot is busy, and not kept.
func (s *Set) boundedFetch(ctx context.Context, r Repo) *fetched {
	if r.Err != nil {
		return s.fetch(ctx, r) // nothing to download
	}
	wait, cancel := context.WithTimeout(ctx, bounds.IndexFetchTime)
	defer cancel()
	release, err := s.slots.Acquire(wait, r.tenant(ctx))
	if err != nil {
		return &fetched{err: fmt.Errorf("index of chart repository %q not fetched: too many index fetches under way, try again: %w",
			r.Name, err), at: s.now(), busy: true}
	}
	defer release()
	return s.fetch(ctx, r)
}

// refetch fetches a project repository's index again in the background, unless under way,
// only with a slot free now: stale repositories never queue goroutines behind the bound.
func (s *Set) refetch(ctx context.Context, r Repo) {
	key := r.cacheKey()
	if _, busy := s.refetching.LoadOrStore(key, true); busy {
		return
	}
	release, ok := s.slots.TryAcquire(r.tenant(ctx))
	if !ok {
		s.refetching.Delete(key)
		return
	}
	go func() {
		defer s.refetching.Delete(key)
		defer release()
		s.indexes.put(key, s.fetch(context.WithoutCancel(ctx), r), false)
	}()
}

func (s *Set) refreshEvery() time.Duration {
	if s.Refresh <= 0 {
		return 5 * time.Minute
	}
	return s.Refresh
}

// SetIndexBudget bounds the parsed indexes kept (CHART_INDEX_CACHE_BYTES) and one
// (CHART_INDEX_MAX_BYTES), estimated; 0 keeps a bound. Call it after Start.
func (s *Set) SetIndexBudget(total, perIndex int64) {
	if s.indexes != nil {
		s.indexes.setBudget(total, perIndex)
	}
}

// IndexCacheSize is the estimated bytes and the number of indexes the cache holds.
func (s *Set) IndexCacheSize() (int64, int) {
	if s.indexes == nil {
		return 0, 0
	}
	return s.indexes.size()
}
