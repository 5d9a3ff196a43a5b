package source

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/async-helm/async-helm/internal/testcharts/hostile"
	"github.com/async-helm/async-helm/pkg/chart/bounds"
	"github.com/async-helm/async-helm/pkg/chart/yamlsize"
)

// denseValues is YAML without aliases whose nodes cost the parser far more than its bytes:
// items of "{a: }," are 6 bytes and a map, a key and a value each.
func denseValues(items int) []byte {
	return []byte("a: [" + strings.Repeat("{a: },", items) + "{}]\n")
}

// A values.yaml of 1.2 MiB of small maps (1.9 KiB on the wire, far within the 64 MiB
// budget) took 348 MiB of allocations in Helm's loader (16 MiB of
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

	root := filepath.Join("..", "..", "..") // the repository
	gitlab, err := os.ReadFile(filepath.Join(root, "testdata", "charts", "gitlab-6.5.4.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := DefaultBudget.check(context.Background(), gitlab)
	nodes := c.nodes
	t.Logf("GitLab 6.5.4: %d nodes and %d subschemas counted, %d and %d allowed", nodes, c.schemaNodes, DefaultBudget.MaxNodes, DefaultBudget.MaxSchemaNodes)
	if err != nil || nodes == 0 || nodes > DefaultBudget.MaxNodes/5 || c.schemaNodes > DefaultBudget.MaxSchemaNodes/5 {
		t.Errorf("GitLab 6.5.4: %d nodes, %d subschemas, %v; want counts well within %d and %d", nodes, c.schemaNodes, err, DefaultBudget.MaxNodes, DefaultBudget.MaxSchemaNodes)
	}
}

// The cache counts what a chart holds parsed beside its files: its nodes (60,000 nodes in
// 120 KiB of values hold ~7 MiB parsed) and its aliases written out (a scalar of 1 MiB
// aliased 20 times is 20 MiB of values); both were counted as their files only.
func TestCacheCountsParsedValues(t *testing.T) {
	src := &Source{HTTP: Policy{AllowLoopback: true}.HTTPClient(time.Minute)}
	for name, c := range map[string]struct {
		values []byte
		want   int64
	}{
		"dense":   {denseValues(20_000), yamlsize.Nodes(denseValues(20_000)) * bounds.ParsedNodeBytes},
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

// An index.yaml of 3 MiB of "{}," (under bounds.MaxIndexBytes, no alias) counts 2 million nodes:
// it is refused before it is parsed (511 MiB of allocations before, 6 MiB now).
func TestNodeHeavyIndexIsRefused(t *testing.T) {
	indexRefusedWithin(t, []byte("apiVersion: v1\nentries:\n  a: ["+strings.Repeat("{},", 1<<20)+"{}]\n"), "YAML nodes", 32<<20)
}

// Indexes parsed at once count at most bounds.MaxIndexNodes together: with all but a few nodes
// taken, an index waits (here until its context ends) and is parsed once they are free.
func TestIndexParsesShareOneNodeBound(t *testing.T) {
	body := []byte("apiVersion: v1\nentries:\n  tiny:\n  - name: tiny\n    version: 0.1.0\n    urls: [tiny-0.1.0.tgz]\n")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(body) }))
	defer srv.Close()
	src := &Source{HTTP: Policy{AllowLoopback: true}.HTTPClient(time.Minute)}
	if _, err := src.FetchIndex(context.Background(), Repository{Name: "r", URL: srv.URL}); err != nil {
		t.Fatal(err)
	}
	taken := bounds.MaxIndexNodes - yamlsize.Nodes(body) + 1
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

// aliasedMaps is YAML of a few KiB that parses into lists×1,000 maps of one key: a list of
// 1,000 aliases of one map, aliased again by each of lists keys of the map under key
// A list of 4,000 scalars comes first: go-yaml v2's guard against
// aliases, a ratio of aliases to nodes decoded, then stays quiet.
func aliasedMaps(prefix, key string, lists int) []byte {
	var b strings.Builder
	b.WriteString(prefix + "zz: [" + strings.Repeat("a, ", 3999) + "a]\nv: &v {name: a}\nl: &l [" + strings.Repeat("*v, ", 999) + "*v]\n" + key + ": {")
	for i := 0; i < lists; i++ {
		fmt.Fprintf(&b, "c%d: *l, ", i)
	}
	b.WriteString("end: 1}\n")
	return []byte(b.String())
}

// Values whose aliases make 100,000 maps out of 5 KiB count their nodes written out:
// 18 such subcharts (a 1.9 KiB archive) loaded and kept 641 MiB live, counted 94,000 nodes.
func TestAliasedValuesCountTheirNodesWrittenOut(t *testing.T) {
	archive := tgz(t, chartYAML("aliased"), entry{Name: "aliased/values.yaml", Data: aliasedMaps("", "m", 100)})
	refusedWithin(t, archive, "YAML nodes in the files Helm's loader parses", 16<<20)
}

// An index.yaml whose aliases make 200,000 chart versions out of 5 KiB is refused by its
// nodes written out, not its bytes' count (it took a 5,000-node share of the parse bound).
func TestAliasedIndexCountsItsNodesWrittenOut(t *testing.T) {
	indexRefusedWithin(t, aliasedMaps("apiVersion: v1\n", "entries", 200), "YAML nodes", 32<<20)
}

// A values.schema.json of 30,000 empty subschemas (90 KB) compiles in seconds, quadratic in
// its subschemas (300 KB took 93 s in submit, with no context to end it):
// the budget counts them, at every level, before anything compiles.
func TestSchemaSubschemasAreBounded(t *testing.T) {
	schema := []byte(`{"allOf": [` + strings.Repeat("{},", 29_999) + `{}]}`)
	archive := tgz(t, chartYAML("schema"), entry{Name: "schema/values.schema.json", Data: schema})
	refusedWithin(t, archive, "subschemas in its values.schema.json files", 16<<20)
	sub := tgz(t, chartYAML("sub"), entry{Name: "sub/values.schema.json", Data: []byte(`{"allOf": [` + strings.Repeat("true,", 6_000) + `true]}`)})
	b := Budget{MaxSchemaNodes: 10_000}
	if _, err := b.Load(tgz(t, chartYAML("top"), entry{Name: "top/charts/a.tgz", Data: sub}, entry{Name: "top/charts/b.tgz", Data: sub})); !errors.Is(err, ErrTooLarge) {
		t.Errorf("two subcharts of 6,000 boolean subschemas each, 10,000 allowed: %v, want ErrTooLarge", err)
	}
	if _, err := b.Load(tgz(t, chartYAML("top"), entry{Name: "top/charts/a.tgz", Data: sub})); err != nil {
		t.Errorf("one subchart of 6,000 subschemas: %v", err)
	}
}

// A pattern of 5 MB (5 KiB in an archive) took 10.9 s and 615 MiB to compile, in submit
// and, by Helm, in the executor: a schema's strings are bounded before anything compiles.
func TestSchemaStringsAreBounded(t *testing.T) {
	schema := []byte(`{"properties": {"x": {"pattern": "` + strings.Repeat("a", 4<<20) + `"}}}`)
	archive := tgz(t, chartYAML("pattern"), entry{Name: "pattern/values.schema.json", Data: schema})
	refusedWithin(t, archive, "has a string of more than", 16<<20)
	if n := longestString([]byte(`{"a": "x\"yz", "b": "\\", "c`)); n != 5 {
		t.Errorf("longestString = %d, want 5", n)
	}
}
