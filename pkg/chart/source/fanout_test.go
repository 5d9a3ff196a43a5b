package source

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/async-helm/async-helm/pkg/chart/bounds"
)

// listing is a chart of subs directory subcharts and one Chart.yaml entry (so Helm processes
// its dependencies); each subchart lists `dependencies: []` when subDeps, and the top's
// values.yaml holds a table of keys keys.
func listing(t *testing.T, table string, subs, keys int, subDeps bool) []byte {
	t.Helper()
	var v strings.Builder
	v.WriteString(table + ":\n")
	for i := range keys {
		fmt.Fprintf(&v, "  k%d: 1\n", i)
	}
	top := "apiVersion: v2\nname: top\nversion: 0.1.0\ndependencies:\n- {name: s0, version: 1.0.0}\n"
	es := []entry{{Name: "top/Chart.yaml", Data: []byte(top)}, {Name: "top/values.yaml", Data: []byte(v.String())}}
	deps := ""
	if subDeps {
		deps = "dependencies: []\n"
	}
	for j := range subs {
		es = append(es, entry{Name: fmt.Sprintf("top/charts/s%d/Chart.yaml", j), Data: []byte(fmt.Sprintf("apiVersion: v2\nname: s%d\nversion: 1.0.0\n%s", j, deps))})
	}
	return tgz(t, es...)
}

// Helm's dependency processing copies the coalesced values whole for each chart of the tree
// that lists dependencies, an empty list too: 2,000 such subcharts beside 20,000 values
// (69 KiB on the wire) took 66 s of CPU and 18.5 GB a pass in the executor. The budget
// charges those copies; the same chart whose subcharts list none loads.
func TestDependencyProcessingCopiesAreCharged(t *testing.T) {
	a := listing(t, "data", 500, 5000, true)
	ch, err := (Budget{}).Load(a)
	if errors.Is(err, ErrTooLarge) && strings.Contains(err.Error(), "dependency processing copies its values") {
		t.Logf("500 subcharts listing no dependencies, 5,000 values (%d bytes on the wire): %v", len(a), err)
	} else {
		n := allocated(func() { err = chartutil.ProcessDependenciesWithMerge(ch, nil) })
		t.Errorf("500 subcharts listing no dependencies, 5,000 values (%d bytes on the wire) loaded; one dependency pass: %v, %d MiB allocated",
			len(a), err, n>>20)
	}
	if _, err := (Budget{}).Load(listing(t, "data", 500, 5000, false)); err != nil {
		t.Errorf("the same subcharts listing nothing: %v, want it loaded", err)
	}
}

// subcharts is a chart of subs subcharts, deps its Chart.yaml entries (nil: none), each
// subchart listing `dependencies: []` when subDeps.
func subcharts(subs int, deps []*chart.Dependency, subDeps bool) *chart.Chart {
	top := &chart.Chart{Metadata: &chart.Metadata{Name: "top", Version: "0.1.0", APIVersion: "v2", Dependencies: deps}}
	for j := range subs {
		md := &chart.Metadata{Name: fmt.Sprintf("s%d", j), Version: "1.0.0", APIVersion: "v2"}
		if subDeps {
			md.Dependencies = []*chart.Dependency{}
		}
		top.AddDependency(&chart.Chart{Metadata: md})
	}
	return top
}

func keys(n int) map[string]any {
	m := map[string]any{}
	for i := range n {
		m[fmt.Sprintf("k%d", i)] = 1
	}
	return m
}

// Helm's coalesce gives every subchart its own copy of the values' global table, and its
// dependency processing copies the values whole for each chart that lists dependencies:
// a request's 10,000 global keys over a 10 KiB chart of 1,000 subcharts held 624 MiB in
// submit. A request's values are charged those copies before anything coalesces them.
func TestRequestValuesAreChargedTheirCopies(t *testing.T) {
	one := []*chart.Dependency{{Name: "s0", Version: "1.0.0"}}
	for _, tc := range []struct {
		name   string
		chart  *chart.Chart
		values map[string]any
		refuse string
	}{
		{"10,000 globals, 1,000 subcharts", subcharts(1000, one, false), map[string]any{"global": keys(10000)}, "once for each of its 1000 subcharts"},
		{"10,000 values, 1,000 subcharts", subcharts(1000, one, false), map[string]any{"data": keys(10000)}, ""},
		{"a global that is no table", subcharts(1000, one, false), map[string]any{"global": "x"}, ""},
		{"200 globals, 200 subcharts", subcharts(200, one, false), map[string]any{"global": keys(200)}, ""},
		{"150,000 values", subcharts(0, nil, false), map[string]any{"data": keys(75000)}, "more than 100000 YAML nodes of the values"},
		{"20,000 values, 100 subcharts listing dependencies", subcharts(100, one, true), map[string]any{"data": keys(10000)}, "once for each of its 101 charts"},
		{"20,000 values, 40 subcharts listing dependencies", subcharts(40, one, true), map[string]any{"data": keys(10000)}, ""},
		{"no values", subcharts(1000, one, true), nil, ""},
		{"no chart", nil, map[string]any{"global": keys(10000)}, ""},
	} {
		err := ChargeValues(tc.chart, tc.values)
		if tc.refuse == "" && err != nil || tc.refuse != "" && (!errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), tc.refuse)) {
			t.Errorf("%s: %v, want refused naming %q", tc.name, err, tc.refuse)
		}
	}
}

// Aliases copy a subchart, its own subcharts with it; a chart Helm does not process
// (no dependency list) copies nothing, but its subcharts still get the globals.
func TestFanoutCountsTheProcessedTree(t *testing.T) {
	s := subcharts(2, []*chart.Dependency{}, true)
	s.Metadata.Name = "s"
	top := &chart.Chart{Metadata: &chart.Metadata{Name: "top", Dependencies: []*chart.Dependency{{Name: "s", Alias: "a"}, {Name: "s", Alias: "b"}, {Name: "s", Alias: "c"}}}}
	top.AddDependency(s)
	if f := fanoutOf(top); f != (fanout{Globals: 9, Copies: 1 + 3*3}) {
		t.Errorf("3 aliases of a chart of 2 subcharts, all listing dependencies: %+v", f)
	}
	top.Metadata.Dependencies = nil
	if f := fanoutOf(top); f != (fanout{Globals: 3}) {
		t.Errorf("the same unprocessed: %+v", f)
	}
}

// GitLab 6.5.4 with its offline values, or with its own values.yaml sent whole as a
// request's, is far within the bounds of the copies.
func TestGitLabsCopiesAreFarWithinTheBounds(t *testing.T) {
	archive, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "charts", "gitlab-6.5.4.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	ch, c, err := DefaultBudget.load(context.Background(), archive)
	if err != nil {
		t.Fatal(err)
	}
	f := fanoutOf(ch)
	t.Logf("GitLab 6.5.4: %+v; its values' copies %d x %d = %d of %d", f, f.Copies, c.nodes, f.Copies*c.nodes, bounds.MaxValuesCopied)
	if f.Copies*c.nodes > bounds.MaxValuesCopied/8 {
		t.Errorf("GitLab's copies %d, want far within %d", f.Copies*c.nodes, bounds.MaxValuesCopied)
	}
	offline, err := chartutil.ReadValuesFile(filepath.Join("..", "..", "..", "testdata", "charts", "gitlab-values-offline.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for name, values := range map[string]map[string]any{"offline": offline, "its own values.yaml": ch.Values} {
		all, g := nodesUpTo(values, bounds.DefaultYAMLNodes), nodesUpTo(values["global"], bounds.DefaultYAMLNodes)
		held := all + g*f.Globals
		t.Logf("GitLab 6.5.4, %s values: %d nodes, global %d: %d held of %d, %d copied of %d", name, all, g, held, bounds.DefaultYAMLNodes,
			held*f.Copies, bounds.MaxValuesCopied)
		if err := ChargeValues(ch, values); err != nil || held > bounds.DefaultYAMLNodes/2 {
			t.Errorf("GitLab 6.5.4, %s values: %v, %d held; want far within %d", name, err, held, bounds.DefaultYAMLNodes)
		}
	}
}
