package helmexec

import (
	"context"
	"fmt"
	"maps"

	"helm.sh/helm/v3/pkg/action"
	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/release"
)

// Rollback runs `helm rollback NAME RollbackTo` for a reservation of revision N+1 and
// returns the final release. Helm computes its new revision as Last()+1 with the
// reservation hidden, which is the reserved one; its Create becomes the adoption.
func (f *Factory) Rollback(ctx context.Context, req Request, opts ...Option) (*helmrelease.Release, error) {
	// Records are the tenant's: measured before Helm parses them; delete only what the release owns.
	opts = append(opts, ownedBy(req), measuredRecords())
	if err := requirePin(req, "rollback"); err != nil {
		return nil, err
	}
	// Innermost of the wrappers the adopter sees: Helm copies the target revision's labels
	// into the new one; every write of the reserved revision carries this request's.
	opts = append(opts, beforeWrite(relabel(release.SecretName(req.Name, req.Revision), req.Labels)), withRollbackPin(req))
	p, err := f.prepare(ctx, req, opts)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Helm's rollback takes no context: it runs in a goroutine of its own, and an end of
	// ctx (a cancel, the deadline) fences it off and leaves it as an orphan.
	_, err = runBounded(ctx, p.fence, func() (*helmrelease.Release, error) { return nil, p.rollback(req) })
	if err = checkAdopted(p.adopter, err); err != nil {
		return nil, err
	}
	rel, err := p.cfg.Releases.Get(req.Name, req.Revision)
	if err != nil {
		return nil, fmt.Errorf("read the rolled back revision %d of %s/%s: %w", req.Revision, req.Namespace, req.Name, err)
	}
	return rel, nil
}

func (h v3Helm) rollback(req Request) error { return newRollback(h.cfg, req).Run(req.Name) }

// newRollback maps a request onto Helm's Rollback; tests check it without a cluster.
func newRollback(cfg *action.Configuration, req Request) *action.Rollback {
	r := action.NewRollback(cfg)
	r.Version = req.RollbackTo
	r.Timeout = req.Timeout
	r.Wait = req.Wait
	r.WaitForJobs = req.WaitForJobs
	r.MaxHistory = req.MaxHistory
	return r
}

// relabel replaces the custom labels of the writes of the revision of Secret key with
// labels (the adopter turns its Create into an Update).
func relabel(key string, labels map[string]string) func(string, *helmrelease.Release) {
	return func(k string, rls *helmrelease.Release) {
		if k != key || len(labels) == 0 {
			return
		}
		l := make(map[string]string, len(rls.Labels)+len(labels)) // Helm shares rls.Labels with the target revision
		maps.Copy(l, rls.Labels)
		maps.Copy(l, labels)
		rls.Labels = l
	}
}
