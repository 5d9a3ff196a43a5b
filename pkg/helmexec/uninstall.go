package helmexec

import (
	"context"
	"fmt"

	"helm.sh/helm/v3/pkg/action"
	helmrelease "helm.sh/helm/v3/pkg/release"
)

// Uninstall runs `helm uninstall --wait` on the release whose latest revision is marked
// uninstalling, and returns the release as Helm last recorded it (uninstalled, its records
// purged). Helm's Uninstall takes no context: ctx is checked before it starts, and Helm's
// timeout bounds its waits once it runs.
func (f *Factory) Uninstall(ctx context.Context, req Request, opts ...Option) (*helmrelease.Release, error) {
	// Records are the tenant's: measured before Helm parses them; delete only what the
	// release owns; run its delete hooks only as their async-helm writer (uninstallhooks.go).
	gate := &hookGate{name: req.Name, opts: req.DeleteHooks}
	_, h, err := f.configure(ctx, req.Namespace, append(opts, ownedByRecordHooks(req), measuredRecords(), gate.option()))
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Guarded as runBounded's actions are: Helm's uninstall runs on the caller's goroutine,
	// and a panic on a hostile record must fail this action, not the process.
	rel, err := guarded(func() (*helmrelease.Release, error) { return h.uninstall(req) })
	if rel != nil && rel.Info != nil {
		rel.Info.Description += gate.note()
	}
	if err != nil {
		return rel, fmt.Errorf("uninstall %s/%s: %w", req.Namespace, req.Name, err)
	}
	return rel, nil
}

func (h v3Helm) uninstall(req Request) (*helmrelease.Release, error) {
	res, err := newUninstall(h.cfg, req).Run(req.Name)
	if res != nil {
		return res.Release, err
	}
	return nil, err
}

// newUninstall maps a request onto Helm's Uninstall; tests check it without a cluster.
func newUninstall(cfg *action.Configuration, req Request) *action.Uninstall {
	u := action.NewUninstall(cfg)
	u.Timeout = req.Timeout
	// Wait until every deleted resource is gone: "uninstalled" then means nothing is left.
	u.Wait = true
	u.Description = req.Description
	u.DisableHooks = req.DeleteHooks.Disabled
	return u
}
