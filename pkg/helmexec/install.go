package helmexec

import (
	"context"
	"errors"
	"fmt"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	helmrelease "helm.sh/helm/v3/pkg/release"

	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/release"
)

// ErrMissingDependency is returned for a chart whose enabled dependency is not inside it,
// as `helm install` reports it (Helm's SDK would silently install without it).
var ErrMissingDependency = errors.New("chart dependency missing")

// Request is one Helm action on a reserved revision.
type Request struct {
	Namespace, Name string
	// Revision is the reserved revision the action adopts.
	Revision int
	// Chart is the chart to install; nil on upgrade reuses the deployed release's chart.
	Chart       *chart.Chart
	Values      map[string]any
	Labels      map[string]string
	Timeout     time.Duration
	Wait        bool
	WaitForJobs bool
	Atomic      bool
	Description string
	// DeleteHooks (uninstalls): whether the record's delete hooks may run (uninstallhooks.go).
	DeleteHooks DeleteHooks
	// MaxHistory is the number of revisions kept per release (0: all, as Helm's).
	MaxHistory int
	// ChartDigest, on an upgrade that reuses the deployed chart (Chart nil), is the
	// release.ChartDigest submit validated: any other chart is refused.
	ChartDigest string
	// RollbackTo is the revision a rollback returns to.
	RollbackTo int
	// RollbackPin, on a rollback or an atomic upgrade, is the only record its rollback may
	// restore (withRollbackPin).
	RollbackPin *release.Pin
	// ValuesPin, on an upgrade, pins the values it may reuse (release.Pin.CheckValues):
	// nil runs with whatever the record holds (events of an older submit).
	ValuesPin *release.Pin
	// RenderTimeout bounds the CPU time of the render in its worker (0: the pool's bound).
	RenderTimeout time.Duration
	// Replace (installs): install over a release whose latest revision failed, as
	// `helm install --replace` (a retry, docs/design.md "Retries and remediation").
	Replace bool
	// ServerSide is the apply method under the v4 engine (api.ApplyMethod*): "" and
	// "false" apply client-side, "true" server-side, "auto" as the release being replaced
	// was applied. The v3 engine applies client-side whatever it says.
	ServerSide string
	// ForceConflicts (server-side apply) takes over the fields another manager owns.
	ForceConflicts bool
	// ReuseValues (upgrades): the last release's values under Values, as --reuse-values.
	ReuseValues bool
	// Annotate, when set, writes the record's own annotations into the chart Helm runs.
	Annotate func(*chart.Chart) error
}

// ErrChartChanged means the chart to run is not the one submit validated.
var ErrChartChanged = errors.New("the chart changed since the request was accepted")

// Install runs `helm install` for a reservation and returns the final release.
func (f *Factory) Install(ctx context.Context, req Request, opts ...Option) (*helmrelease.Release, error) {
	// Records are the tenant's: delete only what the release owns.
	return f.rendered(ctx, req, append(opts, ownedBy(req)), false)
}

// v3Helm is the v3 engine's Helm (action.go).
type v3Helm struct{ cfg *action.Configuration }

func (h v3Helm) install(ctx context.Context, req Request, ch *chart.Chart, values map[string]any) (*helmrelease.Release, error) {
	h.cfg.Releases.MaxHistory = req.MaxHistory // Helm's upgrade and rollback set it, its install does not
	return newInstall(h.cfg, req).RunWithContext(ctx, ch, values)
}

// newInstall maps a request onto Helm's Install; tests check it without a cluster.
func newInstall(cfg *action.Configuration, req Request) *action.Install {
	i := action.NewInstall(cfg)
	i.ReleaseName = req.Name
	i.Namespace = req.Namespace
	i.Timeout = req.Timeout
	i.Wait = req.Wait
	i.WaitForJobs = req.WaitForJobs
	i.Atomic = req.Atomic
	i.Description = req.Description
	i.Labels = req.Labels
	i.Replace = req.Replace
	i.SkipSchemaValidation = true // checked in the worker, within its bounds
	return i
}

// CheckDependencies processes ch's dependencies in place, as Helm's action does, and fails
// for an enabled dependency that the chart does not contain. Values that processing would
// copy past the chart's bounds are refused before anything copies them
// (chartsource.ChargeValues). It mutates ch: give it a private copy.
func CheckDependencies(ch *chart.Chart, values map[string]any) error {
	if err := chartsource.ChargeValues(ch, values); err != nil {
		return err
	}
	if err := chartutil.ProcessDependenciesWithMerge(ch, values); err != nil {
		return fmt.Errorf("process dependencies: %w", err)
	}
	if deps := ch.Metadata.Dependencies; len(deps) > 0 {
		if err := action.CheckDependencies(ch, deps); err != nil {
			return fmt.Errorf("%w: %v", ErrMissingDependency, err)
		}
	}
	return nil
}
