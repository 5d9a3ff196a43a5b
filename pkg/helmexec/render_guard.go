package helmexec

import (
	"errors"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
)

// ErrManifestsTooLarge is a chart whose rendered manifests expand, aliases written out, past
// MaxRenderedBytes: Helm parses them (releaseutil.SortManifests, then the kube client) before
// anything of ours can look at them, writing every alias out.
var ErrManifestsTooLarge = errors.New("the chart's rendered manifests are too large")

// MaxRenderedBytes bounds a chart's rendered manifests with every alias written out, as
// JSON (the template route's MaxOutputBytes: real charts render to a few MiB).
const MaxRenderedBytes = 16 << 20

// MaxRenderedNodes bounds the same manifests' nodes (yamlsize.Nodes, an upper bound from
// the bytes): Helm's parses hold up to ~450 bytes a node, so this keeps one render's parse
// near 200 MiB in the executor. GitLab 6.5.4 renders to about 14,000.
const MaxRenderedNodes = 500_000

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
