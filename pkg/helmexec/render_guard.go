package helmexec

import (
	"errors"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
)

// ErrManifestsTooLarge is a chart whose rendered manifests expand, aliases written out, past
// bounds.MaxRenderedBytes or MaxRenderedNodes: Helm parses them (releaseutil.SortManifests,
// then the kube client) before anything of ours can look at them, writing every alias out.
var ErrManifestsTooLarge = errors.New("the chart's rendered manifests are too large")

// GuardRender is the render a worker runs for Helm's install or upgrade: the chart as the
// action loaded it (dependencies processed), the values, release and capabilities Helm
// renders with.
type GuardRender struct {
	Chart   ChartTree                `json:"chart"`
	Values  map[string]any           `json:"values,omitempty"`
	Release chartutil.ReleaseOptions `json:"release"`
	Caps    *chartutil.Capabilities  `json:"caps,omitempty"`
}

// ChartTree is a loaded chart with its dependencies (which its JSON form leaves out).
type ChartTree struct {
	Chart *chart.Chart `json:"chart"`
	Deps  []ChartTree  `json:"deps,omitempty"`
}

// TreeOf is ch as a ChartTree.
func TreeOf(ch *chart.Chart) ChartTree {
	t := ChartTree{Chart: ch}
	for _, d := range ch.Dependencies() {
		t.Deps = append(t.Deps, TreeOf(d))
	}
	return t
}

// chart rebuilds the tree as a private chart (Helm mutates what it renders).
func (t ChartTree) chart() *chart.Chart {
	c := *t.Chart
	md := *c.Metadata
	c.Metadata = &md
	c.SetDependencies()
	for _, d := range t.Deps {
		c.AddDependency(d.chart())
	}
	return &c
}
