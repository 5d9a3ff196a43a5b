package helmexec

import (
	"context"
	"fmt"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/release"
)

// Upgrade runs `helm upgrade` for a reservation and returns the final release.
func (f *Factory) Upgrade(ctx context.Context, req Request, opts ...Option) (*helmrelease.Release, error) {
	// Records are the tenant's: measured before Helm parses them; delete only what the release owns.
	opts = append(opts, ownedBy(req), measuredRecords())
	if req.Atomic {
		if err := requirePin(req, "atomic upgrade"); err != nil {
			return nil, err
		}
		opts = append(opts, withRollbackPin(req))
	}
	return f.rendered(ctx, req, opts, true)
}

// upgradeChart is the chart an upgrade runs: the request's, or without one the deployed
// revision's (reservations never hold templates), as `helm upgrade --reuse-values` users
// expect of the console's upgrade without a chart URL, checked against the digest submit
// validated.
func upgradeChart(cfg *action.Configuration, req Request) (*chart.Chart, error) {
	if req.Chart != nil {
		return req.Chart, nil
	}
	cur, err := cfg.Releases.Deployed(req.Name)
	if err != nil {
		return nil, fmt.Errorf("find the deployed chart of %s/%s to reuse: %w", req.Namespace, req.Name, err)
	}
	if req.ChartDigest != "" {
		got, err := release.ChartDigest(cur.Chart)
		if err != nil {
			return nil, err
		}
		if got != req.ChartDigest {
			return nil, fmt.Errorf("%w: revision %d (the deployed one) has chart %s, the request was validated against %s",
				ErrChartChanged, cur.Version, got, req.ChartDigest)
		}
	}
	return cur.Chart, nil
}

func (h v3Helm) upgrade(ctx context.Context, req Request, ch *chart.Chart, values map[string]any) (*helmrelease.Release, error) {
	return newUpgrade(h.cfg, req).RunWithContext(ctx, req.Name, ch, values)
}

func newUpgrade(cfg *action.Configuration, req Request) *action.Upgrade {
	u := action.NewUpgrade(cfg)
	u.Namespace = req.Namespace
	u.Timeout = req.Timeout
	u.Wait = req.Wait
	u.WaitForJobs = req.WaitForJobs
	u.Atomic = req.Atomic
	u.Description = req.Description
	u.Labels = req.Labels
	u.MaxHistory = req.MaxHistory
	// upgradeValues gave Helm the values to run, reused ones included: Helm must not read
	// the record again for values of its own.
	u.ResetValues = true
	u.SkipSchemaValidation = true // checked in the worker, within its bounds
	return u
}
