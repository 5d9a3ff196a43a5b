package repos

import (
	"context"
	"errors"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/repo"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
)

func indexYAML(t *testing.T, s *Set, ns string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.IndexYAML(ctx, ns, true)
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
	e.maxCost, e.maxBytes = DefaultMaxMergedIndexCost, 64
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
