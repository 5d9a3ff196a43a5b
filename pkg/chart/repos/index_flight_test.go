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
	"sigs.k8s.io/yaml"

	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
)

// slowRepo is a tenant's own repository server: every index.yaml (under any path) is
// answered after delay; it counts the fetches, those in flight, the most at once, and
// those whose client left before the answer.
type slowRepo struct {
	*httptest.Server
	fetches, inFlight, peak, cancelled atomic.Int64
}

func newSlowRepo(t *testing.T, delay time.Duration) *slowRepo {
	t.Helper()
	idx := repo.NewIndexFile()
	idx.Entries["tiny"] = repo.ChartVersions{cv("tiny", "0.1.0", "")}
	raw, err := yaml.Marshal(idx)
	if err != nil {
		t.Fatal(err)
	}
	s := &slowRepo{}
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
		select {
		case <-time.After(delay):
			_, _ = w.Write(raw)
		case <-r.Context().Done():
			s.cancelled.Add(1)
		}
	}))
	t.Cleanup(s.Close)
	return s
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

// indexHas asks namespace's index within 20 s and checks it lists entry.
func indexHas(s *Set, namespace, entry string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
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

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
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
	srv := newSlowRepo(t, 500*time.Millisecond)
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
	wg.Wait()
	close(errs)
	firstErrors(t, errs)
	if n, peak := srv.fetches.Load(), srv.peak.Load(); n != 1 || peak != 1 {
		t.Errorf("index.yaml fetched %d times, %d at once; want once", n, peak)
	}
}

// A request that leaves while its repository's index is being fetched returns its own
// context's error at once; the fetch goes on for the requests still waiting (it is not
// cancelled with the request that started it, nor started again).
func TestLeavingRequestDoesNotEndTheSharedFetch(t *testing.T) {
	srv := newSlowRepo(t, 2*time.Second)
	s := startSetWith(t, []runtime.Object{project("evil", "slow", srv.URL)}, nil)
	leaving, leave := context.WithCancel(context.Background())
	defer leave()
	left := make(chan error, 1)
	go func() {
		_, err := s.Index(leaving, "evil", true)
		left <- err
	}()
	waitFor(t, "the first request's fetch", func() bool { return srv.inFlight.Load() == 1 })
	stayed := make(chan error, 1)
	go func() { stayed <- indexHas(s, "evil", "tiny--slow") }()
	time.Sleep(200 * time.Millisecond) // the second request waits on the same fetch
	leave()
	at := time.Now()
	select {
	case err := <-left:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the request that left got %v, want its context's error", err)
		}
		if d := time.Since(at); d > 500*time.Millisecond {
			t.Errorf("the request that left returned after %s", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the request that left did not return")
	}
	if err := <-stayed; err != nil {
		t.Errorf("the request that stayed: %v", err)
	}
	if n, c := srv.fetches.Load(), srv.cancelled.Load(); n != 1 || c != 0 {
		t.Errorf("index.yaml fetched %d times, %d cancelled; want one fetch, seen through", n, c)
	}
}

// A namespace's fetches take at most its share of the service's bound: evil's slow
// repositories, asked at once (as requests at different repositories of the namespace or a
// repository whose URL keeps changing make them), are fetched one at a time, and another
// namespace's index from a fast server is answered while evil's are still in flight.
func TestNamespaceTakesOnlyItsShareOfFetches(t *testing.T) {
	slow := newSlowRepo(t, 1500*time.Millisecond)
	fast := newSlowRepo(t, 0)
	objs := []runtime.Object{project("team", "fast", fast.URL)}
	for i := 1; i <= 3; i++ {
		objs = append(objs, project("evil", fmt.Sprintf("r%d", i), fmt.Sprintf("%s/r%d", slow.URL, i)))
	}
	s := startSetWith(t, objs, nil)
	var wg sync.WaitGroup
	for _, r := range s.Repos("evil") {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if f := s.cachedIndex(ctx, r); f.err != nil {
				t.Errorf("evil's %s: %v", r.Name, f.err)
			}
		}()
	}
	waitFor(t, "evil's fetches", func() bool { return slow.inFlight.Load() > 0 })
	time.Sleep(200 * time.Millisecond)
	at := time.Now()
	if err := indexHas(s, "team", "tiny--fast"); err != nil {
		t.Error(err)
	}
	if d, busy := time.Since(at), slow.inFlight.Load(); d > time.Second || busy == 0 {
		t.Errorf("team's index took %s (evil's fetches in flight then: %d), want it while evil's are", d, busy)
	}
	wg.Wait()
	if peak := slow.peak.Load(); peak > 1 {
		t.Errorf("evil's repositories were fetched %d at once, want one at a time (its share)", peak)
	}
}

// However many namespaces ask at once, at most chartsource.MaxIndexFetches indexes are fetched and
// parsed at once; a namespace asking after them waits one round at most.
func TestIndexFetchesShareOneBound(t *testing.T) {
	slow := newSlowRepo(t, time.Second)
	fast := newSlowRepo(t, 0)
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
	waitFor(t, "evil's fetches", func() bool { return slow.inFlight.Load() >= 4 })
	if err := indexHas(s, "team", "tiny--fast"); err != nil {
		t.Error(err)
	}
	if busy := slow.inFlight.Load(); busy == 0 {
		t.Error("team's index waited for every namespace that asked before it, want one round of the bound at most")
	}
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
	slow := newSlowRepo(t, 500*time.Millisecond)
	var objs []runtime.Object
	for i := 1; i <= 8; i++ {
		objs = append(objs, project(fmt.Sprintf("ns-%d", i), "r", slow.URL))
	}
	s := startSetWith(t, objs, func(s *Set) { s.Refresh = 200 * time.Millisecond })
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
	waitFor(t, "the first fetches to end", func() bool { return slow.inFlight.Load() == 0 })
	time.Sleep(300 * time.Millisecond) // every index is stale
	slow.peak.Store(0)
	at := time.Now()
	ask()
	if d := time.Since(at); d > 400*time.Millisecond {
		t.Errorf("stale indexes answered after %s, want at once", d)
	}
	time.Sleep(100 * time.Millisecond) // the refetches behind the answers reach the server
	waitFor(t, "the refetches to end", func() bool { return slow.inFlight.Load() == 0 })
	if peak := slow.peak.Load(); peak > 4 {
		t.Errorf("stale indexes fetched again %d at once, want at most 4", peak)
	}
}
