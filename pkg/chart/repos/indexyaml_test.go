package repos

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/repo"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/async-helm/async-helm/pkg/chart/bounds"
	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/fairqueue"
)

func indexYAML(t *testing.T, s *Set, ns string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.IndexYAML(ctx, ns, IndexOptions{OnlyCompatible: true})
}

// The index.yaml route's answer is encoded once per version of the merged index, shared by
// the namespaces that see the same repositories, and encoded again after a refresh.
func TestIndexYAMLIsEncodedOncePerVersion(t *testing.T) {
	srv := newRepoServer(t, "", "", cv("tiny", "0.1.0", ""))
	s := startSet(t, nil, nil, []runtime.Object{repoObject("HelmChartRepository", "", "acme", srv.URL, false, map[string]string{"ca": "ca"})},
		cm(ConfigNamespace, "ca", KeyCABundle, string(srv.ca)))
	for i := 0; i < 20; i++ {
		b, err := indexYAML(t, s, []string{"a", "b"}[i%2])
		if err != nil {
			t.Fatal(err)
		}
		var idx repo.IndexFile
		if err := yaml.Unmarshal(b, &idx); err != nil || len(idx.Entries["tiny--acme"]) != 1 {
			t.Fatalf("answer %d: %v, entries %v", i, err, idx.Entries)
		}
	}
	if n := s.yamlCache().encodes; n != 1 {
		t.Errorf("20 GETs from two namespaces encoded the index %d times, want 1", n)
	}
	s.refresh(context.Background())
	if _, err := indexYAML(t, s, "a"); err != nil {
		t.Fatal(err)
	}
	if n := s.yamlCache().encodes; n != 2 {
		t.Errorf("after a refresh: %d encodings, want 2", n)
	}
}

// The caller's rate (Admit) is asked only when no answer is kept: a refusal stops the
// encoding, and kept answers are served without asking it.
func TestIndexYAMLAdmitsOnlyWhatItEncodes(t *testing.T) {
	srv := newRepoServer(t, "", "", cv("tiny", "0.1.0", ""))
	s := startSet(t, nil, nil, []runtime.Object{repoObject("HelmChartRepository", "", "acme", srv.URL, false, map[string]string{"ca": "ca"})},
		cm(ConfigNamespace, "ca", KeyCABundle, string(srv.ca)))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	busy := errors.New("too many chart requests")
	if _, err := s.IndexYAML(ctx, "a", IndexOptions{OnlyCompatible: true, Admit: func() error { return busy }}); !errors.Is(err, busy) {
		t.Fatalf("a refused caller with nothing kept: %v, want its refusal", err)
	}
	if n := s.yamlCache().encodes; n != 0 {
		t.Fatalf("%d encodings for a refused caller, want none", n)
	}
	asked := 0
	admit := func() error { asked++; return nil }
	for i := 0; i < 20; i++ {
		if _, err := s.IndexYAML(ctx, "a", IndexOptions{OnlyCompatible: true, Admit: admit}); err != nil {
			t.Fatal(err)
		}
	}
	if asked != 1 {
		t.Errorf("20 GETs, one encoding: the rate was asked %d times, want 1", asked)
	}
}

// A merged index over the bounds is refused with ErrIndexTooLarge (422): over the cost bound
// before anything is encoded, over the bytes bound once encoded, and not encoded again.
func TestIndexYAMLOverItsBoundsIsRefused(t *testing.T) {
	srv := newRepoServer(t, "", "", cv("tiny", "0.1.0", ""), cv("tiny", "0.2.0", ""))
	s := startSet(t, nil, nil, []runtime.Object{repoObject("HelmChartRepository", "", "acme", srv.URL, false, map[string]string{"ca": "ca"})},
		cm(ConfigNamespace, "ca", KeyCABundle, string(srv.ca)))
	e := s.yamlCache()
	e.maxCost = 100
	for i := 0; i < 3; i++ {
		if _, err := indexYAML(t, s, "a"); !errors.Is(err, ErrIndexTooLarge) || !errors.Is(err, chartsource.ErrTooLarge) {
			t.Fatalf("over the cost bound: %v", err)
		}
	}
	if e.encodes != 0 {
		t.Errorf("%d encodings over the cost bound, want none", e.encodes)
	}
	e.maxCost, e.maxBytes = bounds.MaxMergedIndexCost, 64
	s.refresh(context.Background()) // a new version
	for i := 0; i < 3; i++ {
		if _, err := indexYAML(t, s, "b"); !errors.Is(err, ErrIndexTooLarge) {
			t.Fatalf("over the bytes bound: %v", err)
		}
	}
	if e.encodes != 1 {
		t.Errorf("%d encodings of an index over the bytes bound, want 1", e.encodes)
	}
}

// evilYAML asks namespace's index.yaml as the caller evil, who works in several namespaces.
func evilYAML(s *Set, namespace string) error {
	ctx, cancel := context.WithTimeout(chartsource.WithCaller(context.Background(), chartsource.Caller{User: "evil"}), 20*time.Second)
	defer cancel()
	_, err := s.IndexYAML(ctx, namespace, IndexOptions{OnlyCompatible: true})
	return err
}

// evilAndTeam is a Set where evil has 4 namespaces, each with a repository of its own, and
// team one.
func evilAndTeam(t *testing.T) *Set {
	srv := newSlowRepo(t, false)
	objs := []runtime.Object{project("team", "fast", srv.URL)}
	for i := 1; i <= 4; i++ {
		objs = append(objs, project(fmt.Sprintf("evil-%d", i), "r", fmt.Sprintf("%s/r%d", srv.URL, i)))
	}
	return startSetWith(t, objs, nil)
}

// A tenant asking its namespaces' index.yaml in rotation evicts its own answers, not
// another tenant's: team's answer is still kept after evil's 12 GETs over 4 namespaces.
func TestIndexYAMLRotationEvictsOnlyItsOwnAnswers(t *testing.T) {
	s := evilAndTeam(t)
	ctx, cancel := context.WithTimeout(userOf("team"), 20*time.Second)
	defer cancel()
	b, err := s.IndexYAML(ctx, "team", IndexOptions{OnlyCompatible: true})
	if err != nil {
		t.Fatal(err)
	}
	e := s.yamlCache()
	e.answers.budget = int64(len(b)) * 7 / 2 // three answers of this size
	e.answers.share = e.answers.budget / 2
	for i := 0; i < 12; i++ {
		if err := evilYAML(s, fmt.Sprintf("evil-%d", i%4+1)); err != nil {
			t.Fatal(err)
		}
	}
	before := e.encodes
	if _, err := s.IndexYAML(ctx, "team", IndexOptions{OnlyCompatible: true}); err != nil {
		t.Fatal(err)
	}
	if e.encodes != before {
		t.Errorf("team's index.yaml was encoded again after evil's rotation: its answer was evicted")
	}
	if before != 13 {
		t.Errorf("%d encodings for team's 1 and evil's 12 GETs, want 13 (evil's rotation evicts its own)", before)
	}
}

// The encoding slot is taken in turns between tenants: with evil's encoding running and
// three more of evil's waiting, team's waits for the one running only.
func TestIndexYAMLEncodingsTakeTurnsBetweenTenants(t *testing.T) {
	s := evilAndTeam(t)
	e := s.yamlCache()
	gate, entered := make(chan struct{}), make(chan string, 10)
	e.during = func(f fairqueue.Flow) {
		entered <- f.Caller
		if f.Caller == "evil" {
			<-gate
		}
	}
	var wg sync.WaitGroup
	for i := 1; i <= 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := evilYAML(s, fmt.Sprintf("evil-%d", i)); err != nil {
				t.Error(err)
			}
		}()
	}
	if got := <-entered; got != "evil" {
		t.Fatalf("first encoding by %q", got)
	}
	waitQueued(t, e.slot, "evil", 3)
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, err := indexYAML(t, s, "team"); err != nil {
			t.Error(err)
		}
	}()
	waitQueued(t, e.slot, "team", 1)
	gate <- struct{}{}
	if got := <-entered; got != "" {
		t.Errorf("after evil's first encoding the slot went to %q, want team's (the empty caller)", got)
	}
	close(gate)
	wg.Wait()
}

// waitQueued waits until n of namespace's work waits for a slot of q.
func waitQueued(t *testing.T, q *fairqueue.Queue, caller string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		queued := 0
		for _, st := range q.Stats() {
			if st.Caller == caller || (caller == "team" && st.Namespace == "team") {
				queued += st.Queued
			}
		}
		if queued == n {
			return
		}
		goruntime.Gosched()
	}
	t.Fatalf("%s never had %d encodings waiting", caller, n)
}
