package helmexec

import (
	"context"
	"errors"
	"fmt"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	helmrelease "helm.sh/helm/v3/pkg/release"
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

// GuardRender is the render the executor runs before Helm's: the chart as the action loaded
// it, the values, release and capabilities Helm renders with.
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

// runGuard renders job as Helm does and measures each file's expansion before anything
// parses it. A render that fails here is left to Helm's (its capabilities and `lookup`,
// which finds nothing here, decide): only the size bound is this render's to refuse.
func runGuard(job GuardRender) error {
	if err := measure(renderFiles(job)); err != nil {
		return fmt.Errorf("%w: %w: %v", ErrRenderFailed, ErrManifestsTooLarge, err)
	}
	return nil
}

// renderFiles renders job's chart as Helm's install or upgrade does (nil when it fails).
func renderFiles(job GuardRender) map[string]string {
	if job.Chart.Chart == nil || job.Chart.Chart.Metadata == nil {
		return nil
	}
	ch := job.Chart.chart()
	if err := chartutil.ProcessDependenciesWithMerge(ch, job.Values); err != nil {
		return nil
	}
	caps := job.Caps
	if caps == nil {
		caps = chartutil.DefaultCapabilities
	}
	vals, err := chartutil.ToRenderValuesWithSchemaValidation(ch, job.Values, job.Release, caps, true)
	if err != nil {
		return nil
	}
	files, err := engine.Engine{}.Render(ch, vals)
	if err != nil {
		return nil
	}
	return files
}

// preflight is what both engines run before Helm's install or upgrade: the values checked
// against the chart's schemas (in a child when that may not end), then the chart rendered
// once more and its manifests measured. That render runs as Helm's does, under the action's
// fence and render bound (a template that does not end is an orphan, as in Helm's render).
func (f *Factory) preflight(ctx context.Context, req Request, fence *Fence, ch *chart.Chart, values map[string]any, upgrade bool) error {
	if err := f.checkValues(ctx, ch, values); err != nil {
		return err
	}
	if ch == nil {
		return nil
	}
	job := GuardRender{Chart: TreeOf(ch), Values: values,
		Release: chartutil.ReleaseOptions{Name: req.Name, Namespace: req.Namespace, Revision: req.Revision,
			IsUpgrade: upgrade, IsInstall: !upgrade}}
	_, err := runBounded(ctx, runOptions{fence: fence, renderTimeout: req.RenderTimeout}, func() (*helmrelease.Release, error) {
		return nil, runGuard(job)
	})
	return err
}
