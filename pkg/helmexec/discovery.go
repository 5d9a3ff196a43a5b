package helmexec

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"helm.sh/helm/v3/pkg/kube"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/clock"
	"k8s.io/utils/lru"
)

// Defaults of the shared discovery (docs/design.md, "Slots: CPU-bound work and waiting").
const (
	// DefaultDiscoveryMaxAge is how long Helm's own per-action invalidation (it asks for
	// fresh capabilities before every action) is answered from the shared cache.
	DefaultDiscoveryMaxAge = 10 * time.Second
	// maxVerifiedKinds bounds the kinds whose field-validation answer is kept.
	maxVerifiedKinds = 2048
)

// FactoryOption changes how a Factory shares what it learns about the cluster.
type FactoryOption func(*factoryOptions)

type factoryOptions struct {
	clock  clock.PassiveClock
	maxAge time.Duration
	engine Engine // v4config.go
	// renders renders templates out of process (render_out.go).
	renders *RenderPool
	// transport wraps every request's transport (WithTransport).
	transport func(http.RoundTripper) http.RoundTripper
}

// WithClock gives the factory its clock (the discovery cache's age).
func WithClock(c clock.PassiveClock) FactoryOption {
	return func(o *factoryOptions) { o.clock = c }
}

// sharedDiscovery is what every action of one Factory (one API server) shares: the
// discovery cache, the REST mapper over it, the server version and which kinds the server
// validates fields of. All of it is fetched with the factory's own identity and describes
// the server, not a caller: nothing here carries one caller's credentials or rights into
// another's action (each action's requests use its own impersonating clients).
type sharedDiscovery struct {
	cache  discovery.CachedDiscoveryInterface
	mapper *restmapper.DeferredDiscoveryRESTMapper
	clock  clock.PassiveClock
	maxAge time.Duration
	// gen counts refreshes: a miss refreshes only if nobody refreshed since it looked.
	gen        atomic.Uint64
	refreshing sync.Mutex // one refresh at a time

	mu      sync.Mutex
	fetched time.Time     // when the cache was last invalidated
	version *version.Info // the server's, until the next refresh
	// verified holds the kinds the server validates fields of (fieldValidation=Strict
	// works): the answer that costs parsing the group version's OpenAPI v3 document.
	verified *lru.Cache
}

func newSharedDiscovery(dc discovery.DiscoveryInterface, o factoryOptions) *sharedDiscovery {
	if o.clock == nil {
		o.clock = clock.RealClock{}
	}
	if o.maxAge == 0 {
		o.maxAge = DefaultDiscoveryMaxAge
	}
	cache := memory.NewMemCacheClient(dc)
	return &sharedDiscovery{cache: cache, mapper: restmapper.NewDeferredDiscoveryRESTMapper(cache),
		clock: o.clock, maxAge: o.maxAge, fetched: o.clock.Now(), verified: lru.New(maxVerifiedKinds)}
}

// refresh drops the cached discovery, OpenAPI index and server version, unless someone
// refreshed since the caller read seen (concurrent misses refresh once).
// A miss that waits here retries only once the refresh is done.
func (s *sharedDiscovery) refresh(seen uint64) {
	s.refreshing.Lock()
	defer s.refreshing.Unlock()
	if s.gen.Load() != seen {
		return
	}
	s.mapper.Reset() // invalidates the memory cache too; waits for a fetch in progress
	s.mu.Lock()
	s.version = nil
	s.fetched = s.clock.Now()
	s.gen.Add(1) // under mu: serverVersion keeps no version fetched before this
	s.mu.Unlock()
}

// expire is Helm's per-action Invalidate: honoured once the cache is older than maxAge,
// so capabilities lag a change Helm does not see by at most that long.
func (s *sharedDiscovery) expire() {
	seen := s.gen.Load()
	s.mu.Lock()
	old := s.clock.Since(s.fetched) >= s.maxAge
	s.mu.Unlock()
	if old {
		s.refresh(seen)
	}
}

// serverVersion is the server's version, fetched once per refresh. The fetch holds no
// lock: a server that does not answer holds up only the actions that ask it.
func (s *sharedDiscovery) serverVersion() (*version.Info, error) {
	s.mu.Lock()
	v, seen := s.version, s.gen.Load()
	s.mu.Unlock()
	if v == nil {
		fetched, err := s.cache.ServerVersion() // the memory cache does not keep it
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		if s.gen.Load() == seen {
			s.version = fetched
		}
		s.mu.Unlock()
		v = fetched
	}
	c := *v
	return &c, nil
}

// actionDiscovery is the discovery client an action's RESTClientGetter hands Helm.
type actionDiscovery struct {
	discovery.CachedDiscoveryInterface
	s *sharedDiscovery
}

func (d actionDiscovery) Invalidate()                           { d.s.expire() }
func (d actionDiscovery) ServerVersion() (*version.Info, error) { return d.s.serverVersion() }

// sharedReachability is Helm's kube client whose IsReachable (Helm asks before every
// action; the kube client answers with a GET /version as the caller) is the shared server
// version: known, the server was reached. An unreachable server fails the first request.
// Embedding the client keeps every optional interface Helm asserts (InterfaceExt, ...).
type sharedReachability struct {
	*kube.Client
	s *sharedDiscovery
}

func (c sharedReachability) IsReachable() error { return c.s.reachable() }

func (s *sharedDiscovery) reachable() error {
	if _, err := s.serverVersion(); err != nil {
		return fmt.Errorf("Kubernetes cluster unreachable: %w", err)
	}
	return nil
}

// missBudget is one action's single refresh on a miss: a chart full of kinds the server
// does not have costs one refresh, not one per document.
type missBudget struct{ used atomic.Bool }

// refresh refreshes s unless this action already did (or someone did since seen).
func (b *missBudget) refresh(s *sharedDiscovery, seen uint64) {
	if b.used.CompareAndSwap(false, true) {
		s.refresh(seen)
	}
}

// missMapper is the shared REST mapper, refreshed once when a kind is not found: the
// memory cache calls itself fresh once filled, so client-go's deferred mapper would
// never look again, and a CRD created after the first action would stay unknown.
type missMapper struct {
	s      *sharedDiscovery
	budget *missBudget
}

var _ meta.ResettableRESTMapper = missMapper{}

// onMiss runs lookup and, when it finds no match, refreshes and runs it once more.
func onMiss[T any](m missMapper, lookup func() (T, error)) (T, error) {
	seen := m.s.gen.Load()
	v, err := lookup()
	if !meta.IsNoMatchError(err) {
		return v, err
	}
	m.budget.refresh(m.s, seen)
	return lookup()
}

func (m missMapper) KindFor(r schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return onMiss(m, func() (schema.GroupVersionKind, error) { return m.s.mapper.KindFor(r) })
}

func (m missMapper) KindsFor(r schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	return onMiss(m, func() ([]schema.GroupVersionKind, error) { return m.s.mapper.KindsFor(r) })
}

func (m missMapper) ResourceFor(r schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	return onMiss(m, func() (schema.GroupVersionResource, error) { return m.s.mapper.ResourceFor(r) })
}

func (m missMapper) ResourcesFor(r schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	return onMiss(m, func() ([]schema.GroupVersionResource, error) { return m.s.mapper.ResourcesFor(r) })
}

func (m missMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	return onMiss(m, func() (*meta.RESTMapping, error) { return m.s.mapper.RESTMapping(gk, versions...) })
}

func (m missMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	return onMiss(m, func() ([]*meta.RESTMapping, error) { return m.s.mapper.RESTMappings(gk, versions...) })
}

func (m missMapper) ResourceSingularizer(resource string) (string, error) {
	return m.s.mapper.ResourceSingularizer(resource)
}

// Reset is what Helm calls after installing a chart's crds/: always a refresh.
func (m missMapper) Reset() { m.s.refresh(m.s.gen.Load()) }
