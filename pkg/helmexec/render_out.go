package helmexec

import (
	"context"
	"fmt"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/async-helm/async-helm/pkg/auth"
	"github.com/async-helm/async-helm/pkg/fairqueue"
)

// WithRenderWorkers renders the templates of installs and upgrades in p's workers instead
// of in this process (docs/design.md, "Render bound").
func WithRenderWorkers(p *RenderPool) FactoryOption {
	return func(o *factoryOptions) { o.renders = p }
}

// outOfProcess is how an install or upgrade renders out of process: its frozen chart,
// wrapped into its storage before Helm runs.
type outOfProcess struct {
	fz *frozen
}

// renderOutOptions prepares an action of f for a render in a worker (nil: f renders in
// process): the storage wrapper that keeps the real chart in Helm's records.
func (f *Factory) renderOutOptions(opts []Option) (*outOfProcess, []Option, error) {
	if f.renders == nil {
		return nil, opts, nil
	}
	fz, err := newFrozen()
	if err != nil {
		return nil, nil, err
	}
	return &outOfProcess{fz: fz}, append(opts, WithStorageWrapper(fz.storage)), nil
}

// renderOut renders ch in a worker as Helm's install (upgrade false) or upgrade would, and
// returns the chart Helm must run instead: its templates the worker's output. The worker
// checks the values against the chart's schemas first (as preflight does). This process
// handles ch's dependencies as Helm would (the record keeps ch) and fixes the capabilities
// Helm renders with to the ones the worker had. The worker's `lookup` calls are answered
// through the action's REST config, read only.
func (f *Factory) renderOut(ctx context.Context, o *outOfProcess, cfg *action.Configuration, req Request, gate WaitGate, ch *chart.Chart, values map[string]any, upgrade bool) (*chart.Chart, error) {
	checks, err := workerChecks(ch, values)
	if err != nil {
		return nil, err
	}
	if err := chartutil.ProcessDependenciesWithMerge(ch, values); err != nil {
		return nil, err
	}
	caps, err := capabilitiesOf(cfg)
	if err != nil {
		return nil, err
	}
	if kv := ch.Metadata.KubeVersion; kv != "" && !chartutil.IsCompatibleRange(kv, caps.KubeVersion.String()) {
		return nil, fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s", kv, caps.KubeVersion.String())
	}
	rel, err := releaseOptions(cfg, req, upgrade)
	if err != nil {
		return nil, err
	}
	job := GuardRender{Chart: TreeOf(ch), Values: values, Release: rel, Caps: caps}
	restCfg, err := cfg.RESTClientGetter.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	files, err := f.renderInPool(ctx, gate, PoolRender{Job: job, Flow: renderFlow(req.Namespace, restCfg),
		CPU: req.RenderTimeout, Lookup: NewLookups(restCfg), Checks: checks})
	if err != nil {
		return nil, err
	}
	o.fz.freeze(ch, files, job)
	return o.fz.chart, nil
}

// renderInPool renders r in the pool with the action's CPU slot given back: the worker's
// own bounds are the render's, and holding a CPU slot while waiting for a worker (or a
// worker while waiting for a CPU slot, after a lookup) would let renders and CPU slots
// wait on each other until the actions' deadlines.
func (f *Factory) renderInPool(ctx context.Context, gate WaitGate, r PoolRender) (map[string]string, error) {
	if gate != nil {
		gate.Waiting()
		defer gate.Working()
	}
	files, _, err := f.renders.Render(ctx, r)
	return files, err
}

// workerChecks are the values checks of Helm's install or upgrade (as checkValues makes
// them), for the worker to make before it renders: a validation costs up to the schema's
// size times the values', far more when its references recurse, so it runs under the
// render's bounds, in the tenant's worker.
func workerChecks(ch *chart.Chart, values map[string]any) ([]SchemaCheck, error) {
	skip, err := skipSchemaValidation(ch)
	if err != nil || skip {
		return nil, err
	}
	return SchemaChecks(ch, values)
}

// renderFlow is the tenant a render's worker is accounted to, as the executor accounts
// the action: its namespace, and the caller it runs as (the share of a ServiceAccount's
// namespace).
func renderFlow(namespace string, cfg *rest.Config) fairqueue.Flow {
	return fairqueue.Flow{Namespace: namespace, Caller: auth.ShareName(cfg.Impersonate.UserName)}
}

// releaseOptions are the release Helm's install (revision 1) or upgrade (the last
// revision's successor) renders with.
func releaseOptions(cfg *action.Configuration, req Request, upgrade bool) (chartutil.ReleaseOptions, error) {
	if !upgrade {
		return chartutil.ReleaseOptions{Name: req.Name, Namespace: req.Namespace, Revision: 1, IsInstall: true}, nil
	}
	last, err := cfg.Releases.Last(req.Name)
	if err != nil {
		return chartutil.ReleaseOptions{}, fmt.Errorf("find the last revision of %s/%s: %w", req.Namespace, req.Name, err)
	}
	return chartutil.ReleaseOptions{Name: req.Name, Namespace: req.Namespace, Revision: last.Version + 1, IsUpgrade: true}, nil
}

// capabilitiesOf is what Helm's action renders with (Configuration.getCapabilities), fixed
// in cfg so that Helm's render and the worker's see the same.
func capabilitiesOf(cfg *action.Configuration) (*chartutil.Capabilities, error) {
	if cfg.Capabilities != nil {
		return cfg.Capabilities, nil
	}
	dc, err := cfg.RESTClientGetter.ToDiscoveryClient()
	if err != nil {
		return nil, fmt.Errorf("could not get Kubernetes discovery client: %w", err)
	}
	dc.Invalidate()
	kv, err := dc.ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("could not get server version from Kubernetes: %w", err)
	}
	apis, err := action.GetVersionSet(dc)
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, fmt.Errorf("could not get apiVersions from Kubernetes: %w", err)
	}
	cfg.Capabilities = &chartutil.Capabilities{APIVersions: apis,
		KubeVersion: chartutil.KubeVersion{Version: kv.GitVersion, Major: kv.Major, Minor: kv.Minor},
		HelmVersion: chartutil.DefaultCapabilities.HelmVersion}
	return cfg.Capabilities, nil
}

// renderFirst is what the v3 engine runs before Helm's install or upgrade: out of process,
// the chart Helm runs instead of ch (its templates rendered, nothing left to bound);
// otherwise preflight, with ch and the render bound of Helm's own render.
func (f *Factory) renderFirst(ctx context.Context, o *outOfProcess, cfg *action.Configuration, req Request, fence *Fence, gate WaitGate, ch *chart.Chart, values map[string]any, upgrade bool) (*chart.Chart, time.Duration, error) {
	if o == nil {
		return ch, req.RenderTimeout, f.preflight(ctx, req, fence, ch, values, upgrade)
	}
	if ch == nil {
		return nil, 0, fmt.Errorf("no chart to render")
	}
	frozen, err := f.renderOut(ctx, o, cfg, req, gate, ch, values, upgrade)
	return frozen, 0, err
}

// thaw puts the real chart back into the release Helm returned.
func (o *outOfProcess) thaw(rel *helmrelease.Release) {
	if o != nil {
		o.fz.thaw(rel)
	}
}
