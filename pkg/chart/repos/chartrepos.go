// Package repos keeps the chart repositories each namespace sees, as the OpenShift console
// does: HelmChartRepository objects (credentials in openshift-config), the namespace's
// ProjectHelmChartRepository objects, and CHART_REPOSITORIES (read over unstructured: no
// openshift/api). It serves their merged index, keyed "<chart>--<repo>", from a cache
// refreshed in the background.
package repos

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/singleflight"
	"helm.sh/helm/v3/pkg/repo"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/async-helm/async-helm/pkg/chart/bounds"
	chartref "github.com/async-helm/async-helm/pkg/chart/ref"
	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/wallclock"
)

// The console's chart repository resources.
var (
	ClusterGVR = schema.GroupVersionResource{Group: "helm.openshift.io", Version: "v1beta1", Resource: "helmchartrepositories"}
	ProjectGVR = schema.GroupVersionResource{Group: "helm.openshift.io", Version: "v1beta1", Resource: "projecthelmchartrepositories"}
)

// ConfigNamespace holds the CA ConfigMaps and TLS Secrets of cluster repositories.
const ConfigNamespace = "openshift-config"

// Keys of the referenced objects, as openshift/api documents them.
const (
	KeyCABundle = "ca-bundle.crt"
	KeyTLSCert  = "tls.crt"
	KeyTLSKey   = "tls.key"
	// The keys of a basic auth Secret, as the console reads them.
	KeyUsername = "username"
	KeyPassword = "password"
	// KeyEnvCA is the CA of a CHART_REPOSITORY_SECRETS Secret.
	KeyEnvCA = "ca.crt"
)

// Scope says where a repository comes from.
type Scope string

const (
	ScopeEnv     Scope = "env"     // CHART_REPOSITORIES
	ScopeCluster Scope = "cluster" // HelmChartRepository
	ScopeProject Scope = "project" // ProjectHelmChartRepository
)

// Repo is one configured repository.
type Repo struct {
	chartsource.Repository
	Scope     Scope
	Namespace string // of a project repository
	// DisplayName and Description are spec.name and spec.description.
	DisplayName, Description string
	Disabled                 bool
}

// id names a repository's configuration: a changed URL or credentials make a new entry.
func (r Repo) id() string {
	h := sha256.New()
	for _, b := range [][]byte{[]byte(r.Scope), []byte(r.Namespace), []byte(r.Name), []byte(r.URL),
		[]byte(r.Username), []byte(r.Password), r.CA, r.CertPEM, r.KeyPEM} {
		h.Write(b)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// cacheKey is id with the scope in front (a refresh keeps project entries it does not fetch).
func (r Repo) cacheKey() string { return string(r.Scope) + "/" + r.id() }

// tenant is whose share of the fetch slots r's fetches take: the caller's in ctx and its
// namespace's for a project repository, the administrators' otherwise.
func (r Repo) tenant(ctx context.Context) chartsource.Tenant {
	if r.Scope != ScopeProject {
		return chartsource.RefreshTenant
	}
	return chartsource.TenantOf(ctx, r.Namespace)
}

// Set is the repositories of the cluster and of CHART_REPOSITORIES, with their indexes.
type Set struct {
	Dynamic dynamic.Interface
	Client  kubernetes.Interface
	// Env are CHART_REPOSITORIES (name -> URL) and the credentials of CHART_REPOSITORY_SECRETS.
	Env      map[string]string
	EnvCreds map[string]chartsource.Credentials
	Source   *chartsource.Source // fetches the indexes
	// Refresh is how often every index is fetched again (default 5m); a change of an
	// administrator's repository object refreshes at once.
	Refresh     time.Duration
	KubeVersion string // the cluster's, for onlyCompatible
	NoIndex     bool   // no index cache: the executor only resolves repositories
	Log         *zap.SugaredLogger
	Clock       clock.PassiveClock // nil: the wall clock

	cluster, project cache.GenericLister
	kick             chan struct{}
	refreshed        chan struct{} // closed after the first refresh

	indexes *indexCache        // by cacheKey
	flights singleflight.Group // the fetches of misses, one per cacheKey
	// slots bound the refresh's, the misses' and the refetches' fetches together.
	slots      *chartsource.FetchSlots
	refetching sync.Map // cache keys of project repositories being fetched again
	// encoded are the merged indexes encoded for the index.yaml route.
	encoded     *encodings
	encodedOnce sync.Once

	creds *credsCache
}

// Start watches the repository objects and refreshes indexes until ctx ends. Resources the
// cluster does not serve are skipped with a warning: only CHART_REPOSITORIES are seen then.
func (s *Set) Start(ctx context.Context, disc discovery.DiscoveryInterface) error {
	if s.Log == nil {
		s.Log = zap.NewNop().Sugar()
	}
	s.kick = make(chan struct{}, 1)
	s.refreshed = make(chan struct{})
	s.indexes = newIndexCache(0, 0) // SetIndexBudget sets other bounds
	s.slots = s.Source.Slots()
	s.creds = newCredsCache(credsPerNamespace, credsTotal)
	served := map[string]bool{}
	if disc != nil {
		if list, err := disc.ServerResourcesForGroupVersion(ClusterGVR.GroupVersion().String()); err == nil {
			for _, r := range list.APIResources {
				served[r.Name] = true
			}
		} else if !apierrors.IsNotFound(err) {
			return fmt.Errorf("discover %s: %w", ClusterGVR.GroupVersion(), err)
		}
	}
	if s.Dynamic != nil {
		if err := s.watch(ctx, func(r string) bool { return disc == nil || served[r] }); err != nil {
			return err
		}
	}
	if s.NoIndex {
		close(s.refreshed)
		return nil
	}
	go s.loop(ctx)
	return nil
}

// watch starts the informers of the repository objects the cluster serves, each keeping
// only what parse reads (slim), and waits for their caches.
func (s *Set) watch(ctx context.Context, served func(resource string) bool) error {
	inf := dynamicinformer.NewDynamicSharedInformerFactory(s.Dynamic, 0)
	for _, g := range []struct {
		gvr    schema.GroupVersionResource
		scope  Scope
		lister *cache.GenericLister
	}{{ClusterGVR, ScopeCluster, &s.cluster}, {ProjectGVR, ScopeProject, &s.project}} {
		if !served(g.gvr.Resource) {
			s.Log.Warnw("chart repository resource not served; install config/crds or use OpenShift", "resource", g.gvr.String())
			continue
		}
		gi := inf.ForResource(g.gvr)
		if err := gi.Informer().SetTransform(s.slim); err != nil {
			return fmt.Errorf("informer of %s: %w", g.gvr.Resource, err)
		}
		if h := s.onChange(g.scope); h != nil {
			if _, err := gi.Informer().AddEventHandler(h); err != nil {
				return fmt.Errorf("informer of %s: %w", g.gvr.Resource, err)
			}
		}
		*g.lister = gi.Lister()
	}
	inf.Start(ctx.Done())
	for typ, ok := range inf.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("cache of %v did not sync", typ)
		}
	}
	return nil
}

// onChange: a change of an administrator's repository object refreshes every
// administrator's index at once; a project repository's nothing (its index is fetched on
// use, keyed by its configuration), so a tenant's writes cost no other repository's fetch.
func (s *Set) onChange(scope Scope) cache.ResourceEventHandler {
	if scope == ScopeProject {
		return nil
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.Kick() },
		UpdateFunc: func(any, any) { s.Kick() },
		DeleteFunc: func(any) { s.Kick() },
	}
}

func (s *Set) now() time.Time { return wallclock.Or(s.Clock).Now() }

// Kick asks for a refresh of every administrator's index now.
func (s *Set) Kick() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *Set) loop(ctx context.Context) {
	tick := time.NewTicker(s.refreshEvery())
	defer tick.Stop()
	first := true
	for {
		s.refresh(ctx)
		if first {
			close(s.refreshed)
			first = false
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-s.kick:
			// Objects often change in bursts (an apply of several): take them together.
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// refresh fetches the indexes of the cluster's repositories and CHART_REPOSITORIES in the
// fetch slots, and drops those that are gone. Project repositories are fetched on use only
// (Index): their credentials are never read without a request in their namespace.
func (s *Set) refresh(ctx context.Context) {
	all := s.admins(ctx)
	results := make([]*fetched, len(all))
	var wg sync.WaitGroup
	for i, r := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// As long as it takes: one goroutine per administrators' repository.
			release, err := s.slots.Acquire(ctx, r.tenant(ctx))
			if err != nil {
				results[i] = &fetched{err: fmt.Errorf("refresh of chart repository %q: %w", r.Name, err), at: s.now(), busy: true}
				return
			}
			defer release()
			results[i] = s.fetch(ctx, r)
		}()
	}
	wg.Wait()
	current := map[string]bool{}
	for i, r := range all {
		current[r.cacheKey()] = true
		s.indexes.put(r.cacheKey(), results[i], false) // a busy one keeps the entry it replaces
		if results[i].err != nil {
			s.Log.Warnw("chart repository index not fetched", "repository", r.Name, "scope", r.Scope,
				"namespace", r.Namespace, "error", results[i].err.Error())
		}
	}
	s.indexes.retain(func(key string) bool { return current[key] || strings.HasPrefix(key, string(ScopeProject)+"/") })
}

// fetch downloads and parses r's index within bounds.IndexFetchTime, in a fetch slot the caller holds.
func (s *Set) fetch(ctx context.Context, r Repo) *fetched {
	now := s.now()
	if r.Err != nil {
		return &fetched{err: chartref.RedactError(r.Err), at: now}
	}
	ctx, cancel := context.WithTimeout(ctx, bounds.IndexFetchTime)
	defer cancel()
	idx, err := s.Source.FetchIndex(ctx, r.Repository)
	if err != nil {
		// Errors reach logs and the console-warning anyone may read: redacted.
		return &fetched{err: chartref.RedactError(err), at: now}
	}
	redactChartURLs(idx)
	return &fetched{index: idx, cost: indexCost(idx), at: now}
}

// redactChartURLs removes a repository URL's credentials from the chart URLs made absolute
// against it: the cached index is only served, never fetched from.
func redactChartURLs(idx *repo.IndexFile) {
	for _, versions := range idx.Entries {
		for _, cv := range versions {
			for i, u := range cv.URLs {
				cv.URLs[i] = chartref.Redact(u)
			}
		}
	}
}

// admins are the enabled repositories of env and the cluster.
func (s *Set) admins(ctx context.Context) []Repo {
	out := append(s.envRepos(), s.clusterRepos(ctx)...)
	kept := out[:0]
	for _, r := range out {
		if !r.Disabled {
			kept = append(kept, r)
		}
	}
	return kept
}

// Repos are the repositories namespace sees, disabled ones included, one per name: project
// hides cluster, which hides CHART_REPOSITORIES (as the console resolves them).
func (s *Set) Repos(ctx context.Context, namespace string) []Repo {
	ctx, cancel := context.WithTimeout(ctx, bounds.RepositoryListTime)
	defer cancel()
	byName := map[string]Repo{}
	for _, r := range s.envRepos() {
		byName[r.Name] = r
	}
	for _, r := range s.clusterRepos(ctx) {
		byName[r.Name] = r
	}
	if namespace != "" {
		for _, r := range s.projectRepos(ctx, namespace) {
			byName[r.Name] = r
		}
	}
	out := make([]Repo, 0, len(byName))
	for _, r := range byName {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Repositories implements chartsource.Repositories: the enabled repositories namespace sees.
func (s *Set) Repositories(ctx context.Context, namespace string) []chartsource.Repository {
	var out []chartsource.Repository
	for _, r := range s.Repos(ctx, namespace) {
		if !r.Disabled {
			out = append(out, r.Repository)
		}
	}
	return out
}

func (s *Set) envRepos() []Repo {
	out := make([]Repo, 0, len(s.Env))
	for name, u := range s.Env {
		out = append(out, Repo{Repository: chartsource.Repository{Name: name, URL: u, Credentials: s.EnvCreds[name]}, Scope: ScopeEnv})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (s *Set) clusterRepos(ctx context.Context) []Repo {
	if s.cluster == nil {
		return nil
	}
	objs, err := s.cluster.List(labels.Everything())
	if err != nil {
		s.Log.Warnw("list HelmChartRepositories", "error", err.Error())
		return nil
	}
	return s.parseAll(ctx, objs, ScopeCluster)
}

func (s *Set) projectRepos(ctx context.Context, namespace string) []Repo {
	if s.project == nil {
		return nil
	}
	var objs []runtime.Object
	var err error
	if namespace == metav1.NamespaceAll {
		objs, err = s.project.List(labels.Everything())
	} else {
		objs, err = s.project.ByNamespace(namespace).List(labels.Everything())
	}
	if err != nil {
		s.Log.Warnw("list ProjectHelmChartRepositories", "namespace", namespace, "error", err.Error())
		return nil
	}
	return s.parseAll(ctx, objs, ScopeProject)
}

func (s *Set) parseAll(ctx context.Context, objs []runtime.Object, scope Scope) []Repo {
	out := make([]Repo, 0, len(objs))
	for _, o := range objs {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		out = append(out, s.parse(ctx, u, scope))
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Index says whether a Set keeps the merged index (submit serves it; the executor only
// resolves references), refreshed in the background.
type Index bool

const (
	WithIndex    Index = true
	WithoutIndex Index = false
)

// OpenOptions are how Open builds a Set.
type OpenOptions struct {
	Index   Index
	Refresh time.Duration
	Log     *zap.SugaredLogger
}

// Open builds and starts a function's set from its cluster config and src's repositories;
// the caller makes it src.Repos, so references resolve against what the index lists.
func Open(ctx context.Context, cfg *rest.Config, src *chartsource.Source, o OpenOptions) (*Set, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	s := &Set{Dynamic: dyn, Client: cs, Env: src.Repositories, EnvCreds: src.Credentials, Source: src, Refresh: o.Refresh, Log: o.Log, NoIndex: !bool(o.Index)}
	if v, err := cs.Discovery().ServerVersion(); err == nil {
		s.KubeVersion = v.String()
	}
	if err := s.Start(ctx, cs.Discovery()); err != nil {
		return nil, err
	}
	return s, nil
}
