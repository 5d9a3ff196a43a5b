package helmexec

import (
	"reflect"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
)

// An upgrade with ReuseValues runs with the last release's values under its own (as `helm
// upgrade --reuse-values`), and Annotate writes into the chart Helm stores, a reused one too.
func TestUpgradeReusesValuesAndAnnotatesTheChart(t *testing.T) {
	f, mem, opts := offline(t)
	mark := func(v string) func(*chart.Chart) error {
		return func(ch *chart.Chart) error {
			if ch.Metadata.Annotations == nil {
				ch.Metadata.Annotations = map[string]string{}
			}
			ch.Metadata.Annotations["mark"] = v
			return nil
		}
	}
	reserve(t, mem, "web", 1, helmrelease.StatusPendingInstall)
	if _, err := f.Install(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 1, Chart: tiny("1.0.0"),
		Values: map[string]any{"a": "1", "b": "1"}, Annotate: mark("one")}, opts...); err != nil {
		t.Fatal(err)
	}
	if got := get(t, mem, "web", 1).Chart.Metadata.Annotations["mark"]; got != "one" {
		t.Errorf("installed chart's mark %q", got)
	}
	reserve(t, mem, "web", 2, helmrelease.StatusPendingUpgrade)
	if _, err := f.Upgrade(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 2, ReuseValues: true,
		Values: map[string]any{"b": "2"}, Annotate: mark("two")}, opts...); err != nil {
		t.Fatal(err)
	}
	rel := get(t, mem, "web", 2)
	if want := map[string]any{"a": "1", "b": "2"}; !reflect.DeepEqual(rel.Config, want) {
		t.Errorf("upgraded config %v, want %v", rel.Config, want)
	}
	if got := rel.Chart.Metadata.Annotations["mark"]; got != "two" {
		t.Errorf("reused chart's mark %q", got)
	}
	reserve(t, mem, "web", 3, helmrelease.StatusPendingUpgrade)
	if _, err := f.Upgrade(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 3,
		Values: map[string]any{"b": "3"}}, opts...); err != nil {
		t.Fatal(err)
	}
	if want := map[string]any{"b": "3"}; !reflect.DeepEqual(get(t, mem, "web", 3).Config, want) {
		t.Errorf("without reuse: config %v, want %v", get(t, mem, "web", 3).Config, want)
	}
}
