package source

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
)

// The executor's Fresh loads of a checked chart wait for the source's load slots too:
// twice per action, up to containerConcurrency actions at once, they loaded all at once.
func TestFreshWaitsForALoadSlot(t *testing.T) {
	src := &Source{HTTP: Policy{AllowLoopback: true}.HTTPClient(time.Minute), MaxParallelLoads: 1}
	c, err := src.Get(context.Background(), Ref{URL: serve(t, tgz(t, chartYAML("tiny")))})
	if err != nil {
		t.Fatal(err)
	}
	c.Loaded = nil                                              // as the executor's, once the cache let its parsed copy go: Fresh loads the archive
	held, _ := src.loads.TryAcquire(Tenant{Namespace: "other"}) // the one slot taken
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := c.Fresh(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Fresh with the slot taken: %v, want it to wait until its context ends", err)
	}
	held.Release()
	if ch, err := c.Fresh(context.Background()); err != nil || ch.Name() != "tiny" {
		t.Errorf("Fresh with the slot free: %v, %v", ch, err)
	}
}

// A chart Fresh copies from the parsed one is Helm's to process: GitLab 6.5.4's dependencies
// processed with its offline values (most disabled, aliases named) and annotations written on
// the copy leave the parsed chart as it was, and the copy renders as a fresh parse does.
func TestFreshCopiesTheParsedChartForHelmToProcess(t *testing.T) {
	archive, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "charts", "gitlab-6.5.4.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	values, err := chartutil.ReadValuesFile(filepath.Join("..", "..", "..", "testdata", "charts", "gitlab-values-offline.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := loader.LoadArchive(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	before := treeJSON(t, parsed)
	cp, err := (&Chart{Loaded: parsed}).Fresh(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := chartutil.ProcessDependenciesWithMerge(cp, values); err != nil {
		t.Fatal(err)
	}
	cp.Metadata.Annotations = map[string]string{"a": "b"}
	if after := treeJSON(t, parsed); after != before {
		t.Error("processing the copy's dependencies changed the parsed chart")
	}
	fresh, _ := loader.LoadArchive(bytes.NewReader(archive))
	if err := chartutil.ProcessDependenciesWithMerge(fresh, values); err != nil {
		t.Fatal(err)
	}
	fresh.Metadata.Annotations = map[string]string{"a": "b"}
	if treeJSON(t, cp) != treeJSON(t, fresh) {
		t.Error("the processed copy differs from a fresh parse processed alike")
	}
}

// treeJSON is ch and its dependencies (which a chart's JSON leaves out), each with its parent;
// dependencies sorted (Helm's processing orders them by map iteration).
func treeJSON(t *testing.T, ch *chart.Chart) string {
	t.Helper()
	type node struct {
		Chart  *chart.Chart
		Parent string
		Deps   []string
	}
	n := node{Chart: ch}
	if ch.Parent() != nil {
		n.Parent = ch.Parent().Name()
	}
	for _, d := range ch.Dependencies() {
		n.Deps = append(n.Deps, treeJSON(t, d))
	}
	slices.Sort(n.Deps)
	b, err := json.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
