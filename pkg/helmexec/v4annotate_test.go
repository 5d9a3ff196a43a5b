package helmexec

import (
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
)

// Both engines write the request's annotations (values_from's references) into the chart
// they store: the installed one and an upgrade's reused one.
func TestBothEnginesAnnotateTheChartTheyStore(t *testing.T) {
	mark := func(v string) func(*chart.Chart) error {
		return func(ch *chart.Chart) error {
			if ch.Metadata.Annotations == nil {
				ch.Metadata.Annotations = map[string]string{}
			}
			ch.Metadata.Annotations["mark"] = v
			return nil
		}
	}
	for _, e := range []Engine{EngineV3, EngineV4} {
		t.Run(string(e), func(t *testing.T) {
			f, mem, opts := offlineEngine(t, e)
			reserve(t, mem, "web", 1, helmrelease.StatusPendingInstall)
			if _, err := f.Install(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 1, Chart: tiny("1.0.0"),
				Values: map[string]any{"v": "1"}, Annotate: mark("one")}, opts...); err != nil {
				t.Fatal(err)
			}
			if got := get(t, mem, "web", 1).Chart.Metadata.Annotations["mark"]; got != "one" {
				t.Errorf("installed chart's mark %q, want \"one\"", got)
			}
			reserve(t, mem, "web", 2, helmrelease.StatusPendingUpgrade)
			if _, err := f.Upgrade(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 2,
				Values: map[string]any{"v": "2"}, Annotate: mark("two")}, opts...); err != nil {
				t.Fatal(err)
			}
			if got := get(t, mem, "web", 2).Chart.Metadata.Annotations["mark"]; got != "two" {
				t.Errorf("reused chart's mark %q, want \"two\"", got)
			}
		})
	}
}
