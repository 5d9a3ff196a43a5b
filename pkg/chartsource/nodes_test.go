package chartsource

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/async-helm/async-helm/internal/testcharts/hostile"
	"github.com/async-helm/async-helm/internal/testcluster"
	"github.com/async-helm/async-helm/pkg/yamlsize"
)

// denseValues is YAML without aliases whose nodes cost the parser far more than its bytes:
// items of "{a: }," are 6 bytes and a map, a key and a value each.
func denseValues(items int) []byte {
	return []byte("a: [" + strings.Repeat("{a: },", items) + "{}]\n")
}

// A values.yaml of 1.2 MiB of small maps (1.9 KiB on the wire, far within the 64 MiB
// budget) took 348 MiB of allocations in Helm's loader (hostile-tenant review: 16 MiB of
// "[{},…]" peaked at +705 MiB): the budget counts its nodes and refuses it before the
// loader runs (1 MiB allocated).
func TestNodeHeavyValuesAreRefusedBeforeTheLoader(t *testing.T) {
	archive := tgz(t, chartYAML("dense"), entry{Name: "dense/values.yaml", Data: denseValues(200_000)})
	refusedWithin(t, archive, "YAML nodes in the files Helm's loader parses", 16<<20)
}

// The node count is one for the whole tree: two subcharts each within it are refused
// together, one of them loads, and GitLab 6.5.4 (42 loader files) is far within it.
func TestYAMLNodesAreCountedAcrossTheTree(t *testing.T) {
	sub := func(name string) entry {
		return entry{Name: "top/charts/" + name + ".tgz", Data: tgz(t, chartYAML(name),
			entry{Name: name + "/values.yaml", Data: denseValues(20_000)})}
	}
	b := Budget{MaxNodes: 100_000}
	if _, err := b.Load(tgz(t, chartYAML("top"), sub("one"), sub("two"))); !errors.Is(err, ErrTooLarge) {
		t.Errorf("two subcharts of 60,000 nodes each, 100,000 allowed: %v, want ErrTooLarge", err)
	}
	ch, err := b.Load(tgz(t, chartYAML("top"), sub("one")))
	if err != nil || len(ch.Dependencies()) != 1 {
		t.Errorf("one subchart of 60,000 nodes: %v", err)
	}

	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	gitlab, err := os.ReadFile(filepath.Join(root, "testdata", "charts", "gitlab-6.5.4.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := DefaultBudget.check(bytes.NewReader(gitlab))
	nodes := c.nodes
	t.Logf("GitLab 6.5.4: %d nodes counted, %d allowed", nodes, DefaultBudget.MaxNodes)
	if err != nil || nodes == 0 || nodes > DefaultBudget.MaxNodes/5 {
		t.Errorf("GitLab 6.5.4: %d nodes, %v; want a count well within %d", nodes, err, DefaultBudget.MaxNodes)
	}
}

// The cache counts what a chart holds parsed beside its files: its nodes (90,000 nodes in
// 180 KiB of values hold ~10 MiB parsed) and its aliases written out (a scalar of 1 MiB
// aliased 20 times is 20 MiB of values); both were counted as their files only.
func TestCacheCountsParsedValues(t *testing.T) {
	src := &Source{HTTP: Policy{AllowLoopback: true}.HTTPClient(time.Minute)}
	for name, c := range map[string]struct {
		values []byte
		want   int64
	}{
		"dense":   {denseValues(30_000), yamlsize.Nodes(denseValues(30_000)) * parsedNodeBytes},
		"aliased": {hostile.AliasBomb("", 1<<20, 20), 20 << 20},
	} {
		ch, err := src.Get(context.Background(), Ref{URL: serve(t, tgz(t, chartYAML(name), entry{Name: name + "/values.yaml", Data: c.values}))})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if ch.Size() < c.want {
			t.Errorf("%s: cached size %d, want at least %d for its parsed values", name, ch.Size(), c.want)
		}
	}
}

// An index.yaml of 3 MiB of "{}," (under MaxIndexBytes, no alias) counts 2 million nodes:
// it is refused before it is parsed (511 MiB of allocations before, 6 MiB now).
func TestNodeHeavyIndexIsRefused(t *testing.T) {
	indexRefusedWithin(t, []byte("apiVersion: v1\nentries:\n  a: ["+strings.Repeat("{},", 1<<20)+"{}]\n"), "YAML nodes", 32<<20)
}

// Indexes parsed at once count at most MaxIndexNodes together: with all but a few nodes
// taken, an index waits (here until its context ends) and is parsed once they are free.
func TestIndexParsesShareOneNodeBound(t *testing.T) {
	body := []byte("apiVersion: v1\nentries:\n  tiny:\n  - name: tiny\n    version: 0.1.0\n    urls: [tiny-0.1.0.tgz]\n")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(body) }))
	defer srv.Close()
	src := &Source{HTTP: Policy{AllowLoopback: true}.HTTPClient(time.Minute)}
	if _, err := src.FetchIndex(context.Background(), Repository{Name: "r", URL: srv.URL}); err != nil {
		t.Fatal(err)
	}
	taken := MaxIndexNodes - yamlsize.Nodes(body) + 1
	if err := src.parses.Acquire(context.Background(), taken); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := src.FetchIndex(ctx, Repository{Name: "r", URL: srv.URL}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("an index with the nodes taken: %v, want it to wait until its context ends", err)
	}
	src.parses.Release(taken)
	idx, err := src.FetchIndex(context.Background(), Repository{Name: "r", URL: srv.URL})
	if err != nil || len(idx.Entries["tiny"]) != 1 {
		t.Errorf("with the nodes free: %v, %v", idx, err)
	}
}
