package helmexec

import (
	"context"
	"fmt"

	"helm.sh/helm/v3/pkg/action"
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
	if f.v4() {
		return f.upgradeV4(ctx, req, opts)
	}
	out, opts, err := renderOutOptions(opts)
	if err != nil {
		return nil, err
	}
	cfg, adopter, fence, err := f.adoptingConfiguration(req, opts)
	if err != nil {
		return nil, err
	}
	ch := req.Chart
	if ch == nil {
		// Reuse the deployed chart, as `helm upgrade --reuse-values` users expect of the
		// console's upgrade without a chart URL. Reservations never hold templates, so the
		// deployed revision (adopted and complete) is the one to take.
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
		ch = cur.Chart
	}
	if err := annotate(req, ch); err != nil {
		return nil, checkAdopted(adopter, err)
	}
	u := newUpgrade(cfg, req)
	values, err := upgradeValues(cfg, req)
	if err != nil {
		return nil, checkAdopted(adopter, err)
	}
	if ch, err = f.renderOutV3(ctx, out, cfg, req, WaitGateOf(opts...), ch, values, true); err != nil {
		return nil, checkAdopted(adopter, err)
	}
	u.SkipSchemaValidation = true // checked in the worker, within its bounds
	rel, err := runBounded(ctx, fence, func() (*helmrelease.Release, error) {
		return u.RunWithContext(context.WithoutCancel(ctx), req.Name, ch, values)
	})
	out.thaw(rel)
	return rel, checkAdopted(adopter, err)
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
	return u
}
