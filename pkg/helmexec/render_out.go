package helmexec

import (
	"context"
	"fmt"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/async-helm/async-helm/pkg/auth"
	"github.com/async-helm/async-helm/pkg/fairqueue"
)

// WithRenderWorkers renders the templates of installs and upgrades in p's workers (default:
// a pool of DefaultRenderLimits' workers of the factory's own); never in this process
// (docs/design.md, "Render workers").
func WithRenderWorkers(p *RenderPool) FactoryOption {
	return func(o *factoryOptions) { o.renders = p }
}

// renderSite is what an install or upgrade renders with: Helm's capabilities and release,
// and the action's fenced REST config that answers the templates' `lookup` calls.
type renderSite struct {
	caps    *chartutil.Capabilities
	release chartutil.ReleaseOptions
	rest    *rest.Config
}

// renderOut renders ch in a worker as the factory's engine's install (upgrade false) or
// upgrade would (the values checked first), on the Helm v3 configuration both engines read
// through (action.go), and returns fz, frozen: the chart Helm must run instead. ch's
// dependencies are processed here, as Helm would (the record keeps ch).
func (f *Factory) renderOut(ctx context.Context, fz *frozen, cfg *action.Configuration, req Request, gate WaitGate, ch *chart.Chart, values map[string]any, upgrade bool) (*chart.Chart, error) {
	site, err := siteV3(cfg, req, upgrade)
	switch {
	case err != nil:
		return nil, err
	case ch == nil:
		return nil, fmt.Errorf("no chart to render")
	}
	schemas, err := processDependencies(ch, values) // the checks are made in the worker, under the render's bounds
	if err != nil {
		return nil, err
	}
	if kv := ch.Metadata.KubeVersion; kv != "" && !chartutil.IsCompatibleRange(kv, site.caps.KubeVersion.String()) {
		return nil, fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s", kv, site.caps.KubeVersion.String())
	}
	job := GuardRender{Chart: TreeOf(ch), Values: values, Release: site.release, Caps: site.caps}
	files, err := f.renderInPool(ctx, gate, PoolRender{Job: job, Engine: f.Engine(), Flow: renderFlow(req.Namespace, site.rest),
		CPU: req.RenderTimeout, Lookup: NewLookups(site.rest), Schemas: schemas})
	if err != nil {
		return nil, err
	}
	fz.freeze(ch, files, job)
	return fz.chart, nil
}

// siteV3 is what Helm v3's install (upgrade true: upgrade) of req renders with.
func siteV3(cfg *action.Configuration, req Request, upgrade bool) (renderSite, error) {
	caps, err := capabilitiesOf(cfg)
	if err != nil {
		return renderSite{}, err
	}
	rel, err := releaseOptions(cfg, req, upgrade)
	if err != nil {
		return renderSite{}, err
	}
	restCfg, err := cfg.RESTClientGetter.ToRESTConfig()
	if err != nil {
		return renderSite{}, err
	}
	return renderSite{caps: caps, release: rel, rest: restCfg}, nil
}

// renderInPool renders r in the pool with the action's CPU slot given back: holding one
// while waiting for a worker (or the reverse) would let them wait on each other.
func (f *Factory) renderInPool(ctx context.Context, gate WaitGate, r PoolRender) (map[string]string, error) {
	if gate != nil {
		gate.Waiting()
		defer gate.Working()
	}
	files, _, err := f.renders.Render(ctx, r)
	return files, err
}

// renderFlow is the tenant a render's worker is accounted to, as the executor accounts the
// action (auth.ShareName).
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
		return chartutil.ReleaseOptions{}, lastRevisionError(req, err)
	}
	return chartutil.ReleaseOptions{Name: req.Name, Namespace: req.Namespace, Revision: last.Version + 1, IsUpgrade: true}, nil
}

func lastRevisionError(req Request, err error) error {
	return fmt.Errorf("find the last revision of %s/%s: %w", req.Namespace, req.Name, err)
}

// capabilitiesOf is what Helm's action renders with (Configuration.getCapabilities), fixed
// in cfg so that Helm's render and the worker's see the same.
func capabilitiesOf(cfg *action.Configuration) (*chartutil.Capabilities, error) {
	if cfg.Capabilities == nil {
		caps, err := discoverCapabilities(cfg.RESTClientGetter)
		if err != nil {
			return nil, err
		}
		cfg.Capabilities = caps
	}
	return cfg.Capabilities, nil
}

// discoveryGetter is the discovery of an action's REST client getter (either engine's).
type discoveryGetter interface {
	ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error)
}

// discoverCapabilities are the cluster's capabilities as both Helms' getCapabilities find
// them (Helm v3's version).
func discoverCapabilities(g discoveryGetter) (*chartutil.Capabilities, error) {
	dc, err := g.ToDiscoveryClient()
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
	return &chartutil.Capabilities{APIVersions: apis,
		KubeVersion: chartutil.KubeVersion{Version: kv.GitVersion, Major: kv.Major, Minor: kv.Minor},
		HelmVersion: chartutil.DefaultCapabilities.HelmVersion}, nil
}
