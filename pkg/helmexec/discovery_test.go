package helmexec

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/openapi/openapitest"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/async-helm/async-helm/pkg/release/storage"
)

// fakeServer is discovery and OpenAPI v3 as an API server answers them, counting requests.
type fakeServer struct {
	*fakediscovery.FakeDiscovery
	openapi *countingOpenAPI
}

func (s *fakeServer) OpenAPIV3() openapi.Client { return s.openapi }
func (s *fakeServer) OpenAPIV3WithContext(context.Context) openapi.ClientWithContext {
	return openapi.ToClientWithContext(s.openapi)
}

// discoveryRequests counts group, resource and version requests (the fake records them).
func (s *fakeServer) discoveryRequests() int { return len(s.Actions()) }

// addGroup makes the server serve a new group version (a CRD was created).
func (s *fakeServer) addGroup(gv string, r metav1.APIResource, spec string) {
	s.Resources = append(s.Resources, &metav1.APIResourceList{GroupVersion: gv, APIResources: []metav1.APIResource{r}})
	s.openapi.extra["apis/"+gv] = rawSpec(spec)
}

type countingOpenAPI struct {
	files           openapi.Client
	extra           map[string]openapi.GroupVersion
	index, schemata atomic.Int32
}

func (c *countingOpenAPI) Paths() (map[string]openapi.GroupVersion, error) {
	c.index.Add(1)
	paths, err := c.files.Paths()
	if err != nil {
		return nil, err
	}
	for k, v := range c.extra {
		paths[k] = v
	}
	for k, v := range paths {
		paths[k] = countingGV{GroupVersion: v, n: &c.schemata}
	}
	return paths, nil
}

func (c *countingOpenAPI) requests() int { return int(c.index.Load() + c.schemata.Load()) }

type countingGV struct {
	openapi.GroupVersion
	n *atomic.Int32
}

func (g countingGV) Schema(contentType string) ([]byte, error) {
	g.n.Add(1)
	return g.GroupVersion.Schema(contentType)
}

type rawSpec string

func (s rawSpec) Schema(string) ([]byte, error) { return []byte(s), nil }
func (s rawSpec) ServerRelativeURL() string     { return "" }

func newFakeServer() *fakeServer {
	fake := &clienttesting.Fake{Resources: []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "configmaps", Namespaced: true, Kind: "ConfigMap"}}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{{Name: "deployments", Namespaced: true, Kind: "Deployment"}}},
	}}
	return &fakeServer{
		FakeDiscovery: &fakediscovery.FakeDiscovery{Fake: fake, FakedServerVersion: &version.Info{GitVersion: "v1.37.0", Major: "1", Minor: "37"}},
		openapi:       &countingOpenAPI{files: openapitest.NewEmbeddedFileClient(), extra: map[string]openapi.GroupVersion{}},
	}
}

// A factory over the fake server whose actions' own clients dial nothing: every answer
// must come from the shared discovery.
func sharedFactory(srv *fakeServer, opts ...FactoryOption) *Factory {
	var o factoryOptions
	for _, opt := range opts {
		opt(&o)
	}
	return &Factory{rest: &rest.Config{Host: "http://127.0.0.1:1"}, shared: newSharedDiscovery(srv, o), renders: &RenderPool{}}
}

const (
	configMapDoc = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: v\n"
	deployDoc    = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: a\nspec:\n  selector:\n    matchLabels: {app: a}\n  template:\n    metadata:\n      labels: {app: a}\n    spec:\n      containers:\n      - name: a\n        image: busybox\n"
	widgetDoc    = "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: a\nspec:\n  size: 1\n"
	// widgetSpec is the OpenAPI v3 document the server publishes for a CRD's group version:
	// its PATCH takes fieldValidation.
	widgetSpec = `{"openapi":"3.0.0","info":{"title":"example.com/v1","version":"v1"},"paths":{"/apis/example.com/v1/namespaces/{namespace}/widgets/{name}":{"patch":{"x-kubernetes-group-version-kind":{"group":"example.com","version":"v1","kind":"Widget"},"parameters":[{"name":"fieldValidation","in":"query","schema":{"type":"string"}}]}}}}`
)

// runAction does what a Helm install does with discovery before it creates anything:
// capabilities (Invalidate, ServerVersion, the API versions), then Build with validation.
func runAction(t *testing.T, f *Factory, manifest string) error {
	t.Helper() // no t.Fatal: some tests run actions in goroutines
	cfg, err := f.Configuration("ns", WithDriver(storage.NewMemory()))
	if err != nil {
		return err
	}
	dc, err := cfg.RESTClientGetter.ToDiscoveryClient()
	if err != nil {
		return err
	}
	dc.Invalidate() // as Helm's getCapabilities, before every action
	if _, err := dc.ServerVersion(); err != nil {
		return err
	}
	if _, err := action.GetVersionSet(dc); err != nil {
		return err
	}
	_, err = cfg.KubeClient.Build(strings.NewReader(manifest), true)
	return err
}

func TestActionsShareOneDiscoveryAndOpenAPIFetch(t *testing.T) {
	srv := newFakeServer()
	f := sharedFactory(srv, WithClock(clocktesting.NewFakePassiveClock(time.Now())))
	if err := runAction(t, f, configMapDoc+"---\n"+deployDoc); err != nil {
		t.Fatal(err)
	}
	disc, oapi := srv.discoveryRequests(), srv.openapi.requests()
	if disc == 0 || oapi == 0 {
		t.Fatalf("the first action made %d discovery and %d OpenAPI requests: the fake is not asked", disc, oapi)
	}
	for i := 0; i < 20; i++ {
		if err := runAction(t, f, configMapDoc+"---\n"+deployDoc); err != nil {
			t.Fatal(err)
		}
	}
	if d, o := srv.discoveryRequests()-disc, srv.openapi.requests()-oapi; d != 0 || o != 0 {
		t.Errorf("20 more actions made %d discovery and %d OpenAPI requests, want 0 (shared)", d, o)
	}
}

// Helm's per-action Invalidate is honoured once the cache is older than the max age.
func TestHelmsInvalidateRefetchesAfterMaxAge(t *testing.T) {
	srv := newFakeServer()
	clock := clocktesting.NewFakePassiveClock(time.Now())
	f := sharedFactory(srv, WithClock(clock), WithDiscoveryMaxAge(time.Minute))
	if err := runAction(t, f, configMapDoc); err != nil {
		t.Fatal(err)
	}
	before := srv.discoveryRequests()
	clock.SetTime(clock.Now().Add(time.Minute))
	if err := runAction(t, f, configMapDoc); err != nil {
		t.Fatal(err)
	}
	versions := 0
	for _, a := range srv.Actions()[before:] {
		if a.GetResource().Resource == "version" {
			versions++
		}
	}
	if srv.discoveryRequests() == before || versions != 1 {
		t.Errorf("after the max age: %d requests, %d of the version, want a refetch", srv.discoveryRequests()-before, versions)
	}
}

// A kind created after the cache was filled (a CRD another chart installed) is found:
// the miss refreshes discovery and the OpenAPI index once, and later actions share it.
func TestAMissRefreshesOnce(t *testing.T) {
	srv := newFakeServer()
	f := sharedFactory(srv, WithClock(clocktesting.NewFakePassiveClock(time.Now())))
	if err := runAction(t, f, configMapDoc); err != nil {
		t.Fatal(err)
	}
	srv.addGroup("example.com/v1", metav1.APIResource{Name: "widgets", Namespaced: true, Kind: "Widget"}, widgetSpec)
	index := srv.openapi.index.Load()
	if err := runAction(t, f, widgetDoc); err != nil {
		t.Fatalf("the new kind: %v", err)
	}
	if n := srv.openapi.index.Load() - index; n != 1 {
		t.Errorf("the OpenAPI index was fetched %d times for the new kind, want 1", n)
	}
	if _, ok := f.shared.verified.Get(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}); !ok {
		t.Error("the server's field validation of the new kind was not learnt from its published document")
	}
	// The refresh came after the action had its server version: the next one asks again.
	if err := runAction(t, f, widgetDoc); err != nil {
		t.Fatal(err)
	}
	disc, oapi := srv.discoveryRequests(), srv.openapi.requests()
	if err := runAction(t, f, widgetDoc); err != nil {
		t.Fatal(err)
	}
	if d, o := srv.discoveryRequests()-disc, srv.openapi.requests()-oapi; d != 0 || o != 0 {
		t.Errorf("a later action made %d discovery and %d OpenAPI requests, want 0", d, o)
	}
}

// A chart full of kinds the server does not have costs one refresh, not one per document.
func TestUnknownKindsRefreshOncePerAction(t *testing.T) {
	srv := newFakeServer()
	f := sharedFactory(srv, WithClock(clocktesting.NewFakePassiveClock(time.Now())))
	if err := runAction(t, f, configMapDoc); err != nil {
		t.Fatal(err)
	}
	index := srv.openapi.index.Load()
	bogus := strings.Repeat("apiVersion: nowhere.example/v1\nkind: Ghost\nmetadata:\n  name: g\n---\n", 5)
	err := runAction(t, f, bogus)
	if err == nil || !strings.Contains(err.Error(), "Ghost") {
		t.Fatalf("unknown kinds: %v", err)
	}
	if n := srv.openapi.index.Load() - index; n != 1 {
		t.Errorf("5 unknown documents fetched the OpenAPI index %d times, want 1", n)
	}
}

// Without validation (Helm's build of a release's current manifest on upgrade, rollback and
// uninstall), the REST mapper's miss alone refreshes.
func TestAMappingMissRefreshesWithoutValidation(t *testing.T) {
	srv := newFakeServer()
	f := sharedFactory(srv, WithClock(clocktesting.NewFakePassiveClock(time.Now())))
	if err := runAction(t, f, configMapDoc); err != nil {
		t.Fatal(err)
	}
	srv.addGroup("example.com/v1", metav1.APIResource{Name: "widgets", Namespaced: true, Kind: "Widget"}, widgetSpec)
	cfg, err := f.Configuration("ns", WithDriver(storage.NewMemory()))
	if err != nil {
		t.Fatal(err)
	}
	infos, err := cfg.KubeClient.Build(strings.NewReader(widgetDoc), false)
	if err != nil || len(infos) != 1 || infos[0].Mapping.Resource.Resource != "widgets" {
		t.Fatalf("the new kind without validation: %v %v", infos, err)
	}
}

// Actions that miss the same new kind at once all find it, and misses that looked before
// a refresh share it.
func TestConcurrentMissesRefreshOnce(t *testing.T) {
	srv := newFakeServer()
	f := sharedFactory(srv, WithClock(clocktesting.NewFakePassiveClock(time.Now())))
	if err := runAction(t, f, configMapDoc); err != nil {
		t.Fatal(err)
	}
	srv.addGroup("example.com/v1", metav1.APIResource{Name: "widgets", Namespaced: true, Kind: "Widget"}, widgetSpec)
	errs := make(chan error, 8)
	for i := 0; i < cap(errs); i++ {
		go func() { errs <- runAction(t, f, widgetDoc) }()
	}
	for i := 0; i < cap(errs); i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if n := f.shared.gen.Load(); n != 1 {
		t.Errorf("8 actions missing one new kind refreshed %d times, want 1", n)
	}
	// Eight actions (eight budgets) that all looked before the next refresh: one refresh.
	seen := f.shared.gen.Load()
	for i := 0; i < 8; i++ {
		(&missBudget{}).refresh(f.shared, seen)
	}
	if n := f.shared.gen.Load() - seen; n != 1 {
		t.Errorf("8 misses that looked at once refreshed %d times, want 1", n)
	}
}

// WithDiscoveryMaxAge (tests) sets how old the shared discovery may be before an action's
// request for fresh capabilities refetches it (DefaultDiscoveryMaxAge).
func WithDiscoveryMaxAge(d time.Duration) FactoryOption {
	return func(o *factoryOptions) { o.maxAge = d }
}
