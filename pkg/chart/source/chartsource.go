// Package source resolves chart references (archive URL, console index entry
// "<chart>--<repo>", oci://), downloads charts and caches them by URL and digest.
package source

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"

	"github.com/async-helm/async-helm/pkg/chart/bounds"
	chartref "github.com/async-helm/async-helm/pkg/chart/ref"
	"github.com/async-helm/async-helm/pkg/fairqueue"
)

// Sentinel errors, mapped to status codes at the edge.
var (
	ErrInvalidRef  = chartref.ErrInvalid
	ErrNotFound    = errors.New("chart not found")
	ErrUnloadable  = errors.New("chart cannot be loaded")
	ErrTooLarge    = errors.New("chart archive too large")
	ErrUnreachable = errors.New("chart source unreachable")
)

// Ref names a chart; see package chartref.
type Ref = chartref.Ref

// Chart is a downloaded chart archive. Loaded is parsed once and shared: treat it as
// read-only; Fresh gives a private copy for Helm actions, which mutate charts.
type Chart struct {
	Digest string
	Data   []byte
	Loaded *chart.Chart
	size   int64 // what Data and Loaded hold, for the cache's bound
	// loads are the load slots of the Source whose Budget Data passed (nil: made
	// elsewhere), taken in tenant's share; annotate writes the request's annotations.
	loads    *fairqueue.Queue
	tenant   Tenant
	annotate func(*chart.Chart)
}

// Fresh is a chart the caller owns: Private(Loaded) when c holds it, else the archive parsed
// again in one of its source's load slots (each load may take ~65 MiB within the budget); an
// archive that did not come from a Source is checked against DefaultBudget first.
func (c *Chart) Fresh(ctx context.Context) (*chart.Chart, error) {
	switch {
	case c.Loaded != nil:
		return c.annotated(Private(c.Loaded), nil)
	case c.loads == nil:
		return c.annotated(DefaultBudget.Load(c.Data))
	}
	release, err := takeLoad(ctx, c.loads, c.tenant)
	if err != nil {
		return nil, err
	}
	defer release()
	ch, err := loader.LoadArchive(bytes.NewReader(c.Data))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnloadable, err)
	}
	return c.annotated(ch, nil)
}

// Private is a copy of ch that Helm's actions may run: each chart of the tree, its metadata,
// dependency entries and annotations copied (what processing dependencies and annotating
// write); templates, files and values shared (Helm copies values before it writes them).
func Private(ch *chart.Chart) *chart.Chart {
	c, md := *ch, *ch.Metadata
	md.Annotations = maps.Clone(md.Annotations)
	md.Dependencies = slices.Clone(md.Dependencies)
	for i, d := range md.Dependencies {
		if d != nil {
			dc := *d
			md.Dependencies[i] = &dc
		}
	}
	c.Metadata = &md
	c.SetDependencies()
	for _, d := range ch.Dependencies() {
		c.AddDependency(Private(d))
	}
	return &c
}

// Source fetches charts through a cache.
type Source struct {
	HTTP *http.Client
	// Repositories (name to URL) and Credentials, unless Repos gives each namespace its own.
	Repositories map[string]string
	Credentials  map[string]Credentials
	Repos        Repositories
	// PlainHTTPRegistries are OCI registry hosts (host:port) spoken to over plain HTTP.
	PlainHTTPRegistries []string
	MaxBytes            int64
	TTL                 time.Duration
	// MaxCacheBytes bounds the cache's archives and parsed charts, a digest counted once.
	MaxCacheBytes int64
	// Budget bounds what a chart unpacks to, checked before Helm's loader runs.
	Budget Budget
	// MaxParallelLoads bounds the archives checked and loaded at once (default 2), shared
	// between tenants (pkg/fairqueue): each may take up to twice its budget while Helm's
	// loader runs, so the budget alone does not bound memory under many callers.
	MaxParallelLoads int
	// AuthSecrets reads Ref.AuthSecret for the caller (nil: refused); Checker is asked
	// before any repository's credentials go.
	AuthSecrets AuthSecretReader
	Checker     CredentialChecker

	loadsOnce  sync.Once
	loads      *fairqueue.Queue
	slotsOnce  sync.Once
	slots      *FetchSlots
	parsesOnce sync.Once
	parses     *semaphore.Weighted // the indexes being parsed, by their nodes (parseIndex)

	mu      sync.Mutex
	byKey   map[string]*cached
	flights map[string]*flight
}

type cached struct {
	chart         *Chart
	namespace     string // the request's: whom the entry is charged to (evict)
	fetched, used time.Time
}

type flight struct {
	done chan struct{}
	c    *Chart
	err  error
}

// Get returns the chart a reference names, downloading it at most once per TTL
// (concurrent requests for one key share a single download). Its errors never show the
// credentials of a chart URL (https://user:pass@host/...).
func (s *Source) Get(ctx context.Context, ref Ref) (*Chart, error) {
	c, err := s.get(ctx, ref)
	return forRequest(c, ref, TenantOf(ctx, ref.Namespace)), chartref.RedactError(err)
}

func (s *Source) get(ctx context.Context, ref Ref) (*Chart, error) {
	if err := ref.Validate(); err != nil {
		return nil, err
	}
	// Read for the caller before anything else, a cache hit included: one who may not
	// read it gets nothing fetched with it.
	creds, err := s.readAuthSecret(ctx, ref)
	if err != nil {
		return nil, err
	}
	key := cacheKey(ref, creds)
	s.mu.Lock()
	if s.byKey == nil {
		s.byKey, s.flights = map[string]*cached{}, map[string]*flight{}
	}
	if c, ok := s.byKey[key]; ok && (s.TTL <= 0 || time.Since(c.fetched) < s.TTL) {
		c.used = time.Now()
		s.mu.Unlock()
		return c.chart, nil
	}
	if f, ok := s.flights[key]; ok {
		s.mu.Unlock()
		select {
		case <-f.done:
			return f.c, f.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f := &flight{done: make(chan struct{})}
	s.flights[key] = f
	s.mu.Unlock()

	f.c, f.err = s.fetch(ctx, ref, creds)
	s.mu.Lock()
	delete(s.flights, key)
	if f.err == nil && f.c.size <= s.maxCacheBytes() { // a chart bigger than the cache is not kept
		s.byKey[key] = &cached{chart: s.dedupe(f.c), namespace: ref.Namespace, fetched: time.Now(), used: time.Now()}
		f.c = s.byKey[key].chart
		s.evict()
	}
	s.mu.Unlock()
	close(f.done)
	return f.c, f.err
}

// dedupe shares one parsed chart between keys that resolve to the same digest.
func (s *Source) dedupe(c *Chart) *Chart {
	for _, e := range s.byKey {
		if e.chart.Digest == c.Digest {
			return e.chart
		}
	}
	return c
}

func (s *Source) maxCacheBytes() int64 { return positiveOr(s.MaxCacheBytes, bounds.DefaultCacheBytes) }

// evict drops the least recently used entries of the namespace holding the most until the
// cache fits MaxCacheBytes: a namespace's many charts push out its own first.
func (s *Source) evict() {
	for len(s.byKey) > 0 && s.cachedBytes() > s.maxCacheBytes() {
		top := s.largestNamespace()
		var oldest string
		for k, e := range s.byKey {
			if e.namespace == top && (oldest == "" || e.used.Before(s.byKey[oldest].used)) {
				oldest = k
			}
		}
		delete(s.byKey, oldest)
	}
}

// largestNamespace holds the most (a chart shared between keys counts for each), the
// first by name of equals.
func (s *Source) largestNamespace() string {
	held := map[string]int64{}
	for _, e := range s.byKey {
		held[e.namespace] += e.chart.size + keyBytes
	}
	top, most := "", int64(-1)
	for ns, n := range held {
		if n > most || (n == most && ns < top) {
			top, most = ns, n
		}
	}
	return top
}

// cachedBytes is what the cache holds: each digest once, and keyBytes a key.
func (s *Source) cachedBytes() int64 {
	seen := map[string]bool{}
	n := int64(len(s.byKey)) * keyBytes
	for _, e := range s.byKey {
		if !seen[e.chart.Digest] {
			seen[e.chart.Digest] = true
			n += e.chart.size
		}
	}
	return n
}

func (s *Source) fetch(ctx context.Context, ref Ref, creds *Credentials) (*Chart, error) {
	data, err := s.fetchArchive(ctx, ref, creds)
	if err != nil {
		return nil, err
	}
	ch, cost, err := s.load(ctx, TenantOf(ctx, ref.Namespace), data)
	var over *BudgetError
	switch {
	case errors.As(err, &over), errors.Is(err, ctx.Err()) && ctx.Err() != nil:
		return nil, fmt.Errorf("%s: %w", ref, err)
	case err != nil:
		return nil, fmt.Errorf("%w: %s: %v", ErrUnloadable, ref, err)
	}
	if ref.Version != "" && ref.URL != "" && ch.Metadata.Version != ref.Version {
		return nil, fmt.Errorf("%w: %s is version %s, not %s", ErrNotFound, ref.URL, ch.Metadata.Version, ref.Version)
	}
	sum := sha256.Sum256(data)
	return &Chart{Digest: "sha256:" + hex.EncodeToString(sum[:]), Data: data, Loaded: ch,
		size: int64(len(data)) + cost.memory(), loads: s.loads}, nil
}

// fetchArchive fetches ref's archive (an index entry's index first) in a fetch slot of the
// request's tenant (Slots): a download holds up to MaxBytes for up to its timeout.
func (s *Source) fetchArchive(ctx context.Context, ref Ref, creds *Credentials) ([]byte, error) {
	release, err := s.Slots().Acquire(ctx, TenantOf(ctx, ref.Namespace))
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", ref, err)
	}
	defer release()
	switch {
	case ref.NoRepo || creds != nil:
		return s.fetchNoRepo(ctx, ref, creds)
	case ref.IndexEntry != "":
		return s.fetchIndexEntry(ctx, ref)
	case isOCI(ref.URL):
		return s.fetchOCIWith(ctx, ref, nil)
	}
	return s.download(ctx, ref.Namespace, ref.URL)
}

// load checks and loads an archive in a load slot of t's share, until ctx ends; it also
// returns what the archive was charged.
func (s *Source) load(ctx context.Context, t Tenant, data []byte) (*chart.Chart, charged, error) {
	s.loadsOnce.Do(func() {
		s.loads = fairqueue.New(positiveOr(s.MaxParallelLoads, 2), fairqueue.Options{})
	})
	release, err := takeLoad(ctx, s.loads, t)
	if err != nil {
		return nil, charged{}, err
	}
	defer release()
	return s.Budget.load(ctx, data)
}

// takeLoad waits for a load slot of t's share until ctx ends.
func takeLoad(ctx context.Context, slots *fairqueue.Queue, t Tenant) (release func(), err error) {
	seat, err := slots.Acquire(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("wait to load the chart (%d load slots): %w", slots.Slots(), err)
	}
	return seat.Release, nil
}

// Slots bound the indexes and archives fetched at once, here and by package repos: each
// holds up to its bound for its whole download.
func (s *Source) Slots() *FetchSlots {
	s.slotsOnce.Do(func() { s.slots = NewFetchSlots(bounds.MaxIndexFetches) })
	return s.slots
}

// Size is what the chart holds (the archive and what it unpacks to), as the cache counts it.
func (c *Chart) Size() int64 { return c.size }

func (s *Source) maxBytes() int64 { return positiveOr(s.MaxBytes, bounds.DefaultArchiveBytes) }

func (s *Source) download(ctx context.Context, namespace, u string) ([]byte, error) {
	rc, err := s.forURL(ctx, namespace, u)
	if err != nil {
		return nil, err
	}
	return s.fetchWith(ctx, rc, u, s.maxBytes())
}

// fetchWith GETs u with a repository's client and credentials, reading at most limit bytes.
func (s *Source) fetchWith(ctx context.Context, rc *repoClient, u string, limit int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidRef, err)
	}
	rc.authorize(req)
	resp, err := rc.http.Do(req)
	if errors.Is(err, ErrForbiddenHost) {
		return nil, fmt.Errorf("%w (%s)", ErrForbiddenHost, u)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, fmt.Errorf("%w: %s answered 404", ErrNotFound, u)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return nil, fmt.Errorf("%w: %s answered %s (check the repository's credentials)", ErrUnreachable, u, resp.Status)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("%w: %s answered %s", ErrUnreachable, u, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%w: read %s: %v", ErrUnreachable, u, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%w: %s is over %d bytes", ErrTooLarge, u, limit)
	}
	return data, nil
}

// fetchIndexEntry fetches the chart an index entry names with its repository's client
// wherever the chart's URL points (basic auth to the repository's host only): the URL the
// console sends beside the entry, unless it is oci:// (then the entry's index is read).
func (s *Source) fetchIndexEntry(ctx context.Context, ref Ref) ([]byte, error) {
	name, repoName, err := chartref.SplitIndexEntry(ref.IndexEntry)
	if err != nil {
		return nil, err
	}
	r, err := s.Lookup(ctx, ref.Namespace, repoName)
	if err != nil {
		return nil, err
	}
	u := ref.URL
	if u == "" || isOCI(u) {
		if u, err = s.indexedURL(ctx, ref, r, name, repoName); err != nil {
			return nil, err
		}
	}
	rc, err := s.clientFor(r)
	if err != nil {
		return nil, err
	}
	return s.fetchWith(ctx, rc, u, s.maxBytes())
}

// indexedURL is the URL of ref's chart version in repository r's index.
func (s *Source) indexedURL(ctx context.Context, ref Ref, r Repository, name, repoName string) (string, error) {
	idx, err := s.FetchIndex(ctx, r)
	if err != nil {
		return "", err
	}
	cv, err := idx.Get(name, ref.Version)
	if err != nil || len(cv.URLs) == 0 {
		return "", fmt.Errorf("%w: %s version %q in repository %q", ErrNotFound, name, ref.Version, repoName)
	}
	return cv.URLs[0], nil
}

// ParseRepositories reads "name=url,name=url".
func ParseRepositories(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		name, url, ok := strings.Cut(kv, "=")
		if !ok || name == "" || url == "" {
			return nil, fmt.Errorf("chart repository %q: want name=url", kv)
		}
		out[name] = url
	}
	return out, nil
}

func (s *Source) client() *http.Client {
	if s.HTTP != nil {
		return s.HTTP
	}
	return &http.Client{Timeout: bounds.DownloadTime}
}
