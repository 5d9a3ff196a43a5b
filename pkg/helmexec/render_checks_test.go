package helmexec

import (
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	helmrelease "helm.sh/helm/v3/pkg/release"
)

// The checks, read off the one dependency processing and the values the render coalesces,
// are the checks schemaChecks makes on a copy: GitLab 6.5.4 (two subcharts with schemas, others
// disabled by the values) with its offline values.
func TestWorkerChecksAreSchemaChecks(t *testing.T) {
	values, err := chartutil.ReadValuesFile(filepath.Join("..", "..", "testdata", "charts", "gitlab-values-offline.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for name, vals := range map[string]map[string]any{"offline values": values} {
		t.Run(name, func(t *testing.T) {
			load := func() *chart.Chart {
				ch, err := loader.Load(filepath.Join("..", "..", "testdata", "charts", "gitlab-6.5.4.tgz"))
				if err != nil {
					t.Fatal(err)
				}
				return ch
			}
			want, err := schemaChecks(load(), vals)
			if err != nil {
				t.Fatal(err)
			}
			ch := load()
			if schemas, err := processDependencies(ch, vals); err != nil || !schemas {
				t.Fatalf("processDependencies: schemas %t, %v", schemas, err)
			}
			top, err := chartutil.ToRenderValuesWithSchemaValidation(ch, vals, chartutil.ReleaseOptions{}, nil, true)
			if err != nil {
				t.Fatal(err)
			}
			got := collectChecks(ch, top["Values"].(chartutil.Values))
			// Helm's processing orders a chart's dependencies by map iteration.
			byChart := func(cs []SchemaCheck) { sort.Slice(cs, func(i, j int) bool { return cs[i].Chart < cs[j].Chart }) }
			byChart(got)
			byChart(want)
			if len(got) != len(want) {
				t.Fatalf("worker checks %d charts, schemaChecks %d", len(got), len(want))
			}
			for i := range want {
				if got[i].Chart != want[i].Chart || !reflect.DeepEqual(got[i].Values, want[i].Values) || string(got[i].Schema) != string(want[i].Schema) {
					t.Errorf("check %d: worker's %s, schemaChecks' %s (or their values or schema differ)", i, got[i].Chart, want[i].Chart)
				}
			}
			if name == "offline values" && len(want) == 0 {
				t.Fatal("GitLab's offline values enable charts with schemas: no check at all")
			}
		})
	}
}

// schemaChecks are the checks of ch and the user's values, ch not changed: the
// dependencies are processed on a copy of what the check reads.
func schemaChecks(ch *chart.Chart, values map[string]any) ([]SchemaCheck, error) {
	if ch == nil {
		return nil, nil
	}
	tree := schemaTree(ch)
	if err := chartutil.ProcessDependenciesWithMerge(tree, values); err != nil {
		return nil, fmt.Errorf("process dependencies: %w", err)
	}
	merged, err := chartutil.CoalesceValues(tree, values)
	if err != nil {
		return nil, err
	}
	return collectChecks(tree, merged), nil
}

// schemaTree copies of ch what processing dependencies changes: the charts and their
// dependency lists (Helm replaces a chart's Values, it does not write into them).
func schemaTree(ch *chart.Chart) *chart.Chart {
	md := *ch.Metadata
	md.Dependencies = make([]*chart.Dependency, len(ch.Metadata.Dependencies))
	for i, d := range ch.Metadata.Dependencies {
		c := *d
		md.Dependencies[i] = &c
	}
	out := &chart.Chart{Metadata: &md, Lock: ch.Lock, Schema: ch.Schema, Values: ch.Values}
	for _, d := range ch.Dependencies() {
		out.AddDependency(schemaTree(d))
	}
	return out
}

// Values whose table for a subchart is a string (Helm's coalesce: "type mismatch on sub"),
// for a chart whose Chart.yaml lists no dependency (its charts/ still are), fail as Helm's
// coalesce does, not as a template's error.
func TestATypeMismatchFailsAsACoalesce(t *testing.T) {
	f, mem, opts := offlineOn(t)
	p := tiny("1.0.0")
	s := tiny("1.0.0")
	s.Metadata.Name = "sub"
	p.AddDependency(s)
	reserve(t, mem, "web", 1, helmrelease.StatusPendingInstall)
	_, err := f.Install(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 1, Chart: p,
		Values: map[string]any{"sub": "x"}}, opts...)
	const want = "coalesce values: type mismatch on sub: %!t(string=x) (the reservation was not adopted)"
	if err == nil || err.Error() != want {
		t.Errorf("install: %v\nwant: %s", err, want)
	}
}
