package chaos

import (
	"context"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
)

// checkConsumed proves each accepted revision's run from what async-helm wrote in its own
// namespace: the executor binds the request to its Secret on the consumed record before
// Helm runs, and records the outcome after. A final revision whose request is not bound
// to it, or bound with another outcome than its status (a record found final unconsumed is
// "refused: reservation rewritten"), got its status from no run of the executor. No
// outcome yet is a run cut after Helm (a SIGKILL), or one that lost its Lease to an
// executor that found the revision final.
func (r *run) checkConsumed(ctx context.Context, revs map[string][]release.Revision, accepted []string) (bound int) {
	store := &consumed.Store{Client: r.cl.Typed, Namespace: r.own}
	for _, name := range accepted {
		for _, rev := range revs[name] {
			rec, err := store.Lookup(ctx, rev.RequestID)
			switch {
			case err != nil:
				r.rep.violate("%s revision %d: %v", name, rev.Version, err)
			case rec == nil:
				r.rep.violate("%s revision %d is %s and its request %s was never consumed: no run is bound to it", name, rev.Version, rev.Status, rev.RequestID)
			case rec.SecretUID != rev.UID:
				r.rep.violate("%s revision %d is %s and its request is bound to another Secret (%s, not %s)", name, rev.Version, rev.Status, rec.SecretUID, rev.UID)
			case rec.Outcome != "" && rec.Outcome != rev.Status:
				r.rep.violate("%s revision %d is %s and its request's recorded outcome is %q", name, rev.Version, rev.Status, rec.Outcome)
			default:
				bound++
			}
		}
	}
	return bound
}
