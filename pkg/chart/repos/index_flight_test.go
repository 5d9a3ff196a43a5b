package repos

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/repo"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/yaml"

	"github.com/async-helm/async-helm/pkg/chart/bounds"
	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
)

// slowRepo is a tenant's own repository server: every index.yaml (under any path) says it
// started, then waits for a token of gate (closed: no more waiting) unless gate is nil; it
// counts the fetches, those in flight, the most at once, and those whose client left.
type slowRepo struct {
	*httptest.Server
	fetches, inFlight, peak, cancelled atomic.Int64
	started                            chan struct{}

	mu   sync.Mutex
	gate chan struct{}
}

func newSlowRepo(t *testing.T, gated bool) *slowRepo {
	t.Helper()
	idx := repo.NewIndexFile()
	idx.Entries["tiny"] = repo.ChartVersions{cv("tiny", "0.1.0", "")}
	raw, err := yaml.Marshal(idx)
	if err != nil {
		t.Fatal(err)
	}
	s := &slowRepo{started: make(chan struct{}, 100)}
	if gated {
		s.gate = make(chan struct{})
	}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/index.yaml") {
			http.NotFound(w, r)
			return
		}
		s.fetches.Add(1)
		n := s.inFlight.Add(1)
		defer s.inFlight.Add(-1)
		for p := s.peak.Load(); n > p && !s.peak.CompareAndSwap(p, n); p = s.peak.Load() {
		}
		s.mu.Lock()
		gate := s.gate
		s.mu.Unlock()
		if gate != nil {
			s.started <- struct{}{}
			select {
			case <-gate:
			case <-r.Context().Done():
				s.cancelled.Add(1)
				return
			}
		}
		_, _ = w.Write(raw)
	}))
	t.Cleanup(s.Close)
	return s
}

// hold makes the fetches from now on wait for the gate.
func (s *slowRepo) hold() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gate = make(chan struct{})
}

// open lets every fetch through, now and later.
func (s *slowRepo) open() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.gate)
}

// waitStarted waits for n fetches to reach the server.
func (s *slowRepo) waitStarted(n int) {
	for range n {
		<-s.started
	}
}

// userOf is a context whose caller is a user of namespace's own.
func userOf(namespace string) context.Context {
	return chartsource.WithCaller(context.Background(), chartsource.Caller{User: "user-of-" + namespace})
}

// startSetWith is startSet with a change of the Set before it starts.
func startSetWith(t *testing.T, objs []runtime.Object, change func(*Set)) *Set {
	t.Helper()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		ClusterGVR: "HelmChartRepositoryList", ProjectGVR: "ProjectHelmChartRepositoryList"}, objs...)
	src := &chartsource.Source{HTTP: chartsource.Policy{AllowLoopback: true}.HTTPClient(10 * time.Second)}
	s := &Set{Dynamic: dyn, Client: fake.NewSimpleClientset(), Source: src, Refresh: time.Hour}
	src.Repos = s // before Start: its refresh reads it
	if change != nil {
		change(s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := s.Start(ctx, nil); err != nil {
		t.Fatal(err)
	}
	return s
}

func project(ns, name, u string) runtime.Object {
	return repoObject("ProjectHelmChartRepository", ns, name, u, false, nil)
}

// indexHas asks namespace's index, as a user of its own, and checks it lists entry.
func indexHas(s *Set, namespace, entry string) error {
	ctx, cancel := context.WithTimeout(userOf(namespace), 20*time.Second)
	defer cancel()
	idx, err := s.Index(ctx, namespace, true)
	if err != nil {
		return fmt.Errorf("index of %s: %w", namespace, err)
	}
	if len(idx.Entries[entry]) == 0 {
		return fmt.Errorf("index of %s: %s missing (warning %q)", namespace, entry, idx.Annotations[WarningAnnotation])
	}
	return nil
}

// firstErrors reports at most a few of errs (50 requests fail alike).
func firstErrors(t *testing.T, errs <-chan error) {
	t.Helper()
	n := 0
	for err := range errs {
		if n++; n <= 3 {
			t.Error(err)
		}
	}
	if n > 3 {
		t.Errorf("... and %d more", n-3)
	}
}

// The hostile-tenant probe: 50 concurrent index requests of one namespace whose new
// repository answers slowly make one fetch of its index, not 50 at once (each can hold a
// 10 MiB index.yaml and its parse), and every request gets the index.
func TestConcurrentIndexRequestsShareOneFetch(t *testing.T) {
	srv := newSlowRepo(t, true)
	s := startSetWith(t, []runtime.Object{project("evil", "slow", srv.URL)}, nil)
	errs := make(chan error, 50)
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := indexHas(s, "evil", "tiny--slow"); err != nil {
				errs <- err
			}
		}()
	}
	srv.waitStarted(1)
	srv.open()
	wg.Wait()
	close(errs)
	firstErrors(t, errs)
	if n, peak := srv.fetches.Load(), srv.peak.Load(); n != 1 || peak != 1 {
		t.Errorf("index.yaml fetched %d times, %d at once; want once", n, peak)
	}
}

// A request that leaves while its repository's index is being fetched returns its own
// context's error at once (the fetch is still held at the server); the fetch goes on for
// the requests still waiting (it is not cancelled with the request that started it, nor
// started again).
func TestLeavingRequestDoesNotEndTheSharedFetch(t *testing.T) {
	srv := newSlowRepo(t, true)
	s := startSetWith(t, []runtime.Object{project("evil", "slow", srv.URL)}, nil)
	leaving, leave := context.WithCancel(userOf("evil"))
	defer leave()
	left := make(chan error, 1)
	go func() {
		_, err := s.Index(leaving, "evil", true)
		left <- err
	}()
	srv.waitStarted(1)
	stayed := make(chan error, 1)
	go func() { stayed <- indexHas(s, "evil", "tiny--slow") }()
	leave()
	if err := <-left; !errors.Is(err, context.Canceled) {
		t.Errorf("the request that left got %v, want its context's error", err)
	}
	srv.open()
	if err := <-stayed; err != nil {
		t.Errorf("the request that stayed: %v", err)
	}
	if n, c := srv.fetches.Load(), srv.cancelled.Load(); n != 1 || c != 0 {
		t.Errorf("index.yaml fetched %d times, %d cancelled; want one fetch, seen through", n, c)
	}
}

// A caller's fetches take at most its share of the service's bound: evil's slow
// repositories, asked at once (as requests at different repositories of the namespace or a
// repository whose URL keeps changing make them), hold all slots but one, and another
// namespace's index from a fast server is answered while evil's are still held.
func TestNamespaceTakesOnlyItsShareOfFetches(t *testing.T) {
	slow := newSlowRepo(t, true)
	fast := newSlowRepo(t, false)
	objs := []runtime.Object{project("team", "fast", fast.URL)}
	for i := 1; i <= 5; i++ {
		objs = append(objs, project("evil", fmt.Sprintf("r%d", i), fmt.Sprintf("%s/r%d", slow.URL, i)))
	}
	s := startSetWith(t, objs, nil)
	var wg sync.WaitGroup
	for _, r := range s.Repos(context.Background(), "evil") {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(userOf("evil"), 20*time.Second)
			defer cancel()
			if f := s.cachedIndex(ctx, r); f.err != nil {
				t.Errorf("evil's %s: %v", r.Name, f.err)
			}
		}()
	}
	slow.waitStarted(bounds.MaxIndexFetches - 1)
	if err := indexHas(s, "team", "tiny--fast"); err != nil {
		t.Error(err)
	}
	if busy := slow.inFlight.Load(); busy != bounds.MaxIndexFetches-1 {
		t.Errorf("team's index answered with %d of evil's fetches held, want %d", busy, bounds.MaxIndexFetches-1)
	}
	slow.open()
	wg.Wait()
	if peak := slow.peak.Load(); peak > bounds.MaxIndexFetches-1 {
		t.Errorf("evil's repositories were fetched %d at once, want at most %d (its share)", peak, bounds.MaxIndexFetches-1)
	}
}

// However many namespaces ask at once, at most bounds.MaxIndexFetches indexes are
// fetched and parsed at once; a namespace asking after them gets a slot before they have
// all been fetched.
func TestIndexFetchesShareOneBound(t *testing.T) {
	slow := newSlowRepo(t, true)
	fast := newSlowRepo(t, false)
	objs := []runtime.Object{project("team", "fast", fast.URL)}
	for i := 1; i <= 6; i++ {
		objs = append(objs, project(fmt.Sprintf("evil-%d", i), "r", slow.URL))
	}
	s := startSetWith(t, objs, nil)
	errs := make(chan error, 12)
	var wg sync.WaitGroup
	for i := 1; i <= 6; i++ {
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := indexHas(s, fmt.Sprintf("evil-%d", i), "tiny--r"); err != nil {
					errs <- err
				}
			}()
		}
	}
	slow.waitStarted(bounds.MaxIndexFetches)
	team := make(chan error, 1)
	go func() { team <- indexHas(s, "team", "tiny--fast") }()
	slow.gate <- struct{}{} // one fetch ends; each that starts after it lets one more end
	for done := false; !done; {
		select {
		case err := <-team:
			if err != nil {
				t.Error(err)
			}
			if busy := slow.inFlight.Load(); busy == 0 {
				t.Error("team's index waited for every namespace that asked before it")
			}
			done = true
		case <-slow.started:
			slow.gate <- struct{}{}
		}
	}
	slow.open()
	wg.Wait()
	close(errs)
	firstErrors(t, errs)
	if n, peak := slow.fetches.Load(), slow.peak.Load(); n != 6 || peak > 4 {
		t.Errorf("6 namespaces' indexes fetched %d times, %d at once; want 6, at most 4 at once", n, peak)
	}
}

// Stale project indexes are answered as they are and fetched again behind the answer
// within the same bound: no goroutine per stale repository.
func TestStaleRefetchesAreBounded(t *testing.T) {
	slow := newSlowRepo(t, false)
	var objs []runtime.Object
	for i := 1; i <= 8; i++ {
		objs = append(objs, project(fmt.Sprintf("ns-%d", i), "r", slow.URL))
	}
	clk := testingclock.NewFakePassiveClock(time.Now())
	s := startSetWith(t, objs, func(s *Set) { s.Clock = clk })
	var wg sync.WaitGroup
	ask := func() {
		for i := 1; i <= 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := indexHas(s, fmt.Sprintf("ns-%d", i), "tiny--r"); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	ask() // cached
	slow.hold()
	clk.SetTime(clk.Now().Add(2 * s.refreshEvery())) // every index is stale
	slow.peak.Store(0)
	ask() // answered while every refetch is held at the server
	slow.waitStarted(bounds.MaxIndexFetches)
	slow.open()
	if peak := slow.peak.Load(); peak > bounds.MaxIndexFetches {
		t.Errorf("stale indexes fetched again %d at once, want at most %d", peak, bounds.MaxIndexFetches)
	}
}
