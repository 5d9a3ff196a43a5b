package sweeper

import (
	"context"

	"github.com/async-helm/async-helm/pkg/release"
)

// freeHeldSlots frees the MAX_QUEUED slots that queued records with a final status label
// hold (release.HeldSlot) by dropping their queued label, one label-only write each, with
// nothing decoded and no deadline: no record of ours is ever in that state, so one is a
// tenant's seal written back onto a finished or re-made record, or its own waiting
// reservation with the status label flipped (which then fails unrun when delivered).
// Without it such records counted until the tenant took them off; now each costs the
// tenant a write per sweep.
func (s *Sweeper) freeHeldSlots(ctx context.Context, res *SweepResult) {
	slots, err := s.heldSlots(ctx)
	if err != nil {
		s.Log.Warnw("list queued revisions with a final status label", "error", err)
		return
	}
	for _, h := range slots {
		dropped, err := s.Store.UnqueueHeld(ctx, h)
		if err != nil {
			s.Log.Warnw("free a held queue slot", "namespace", h.Namespace, "secret", h.SecretName, "error", err)
			continue
		}
		if dropped {
			res.Unqueued++
			s.Log.Infow("queued label dropped from a record labelled final", "namespace", h.Namespace, "secret", h.SecretName)
		}
	}
}

func (s *Sweeper) heldSlots(ctx context.Context) ([]release.HeldSlot, error) {
	if s.Index != nil {
		return s.Index.HeldSlots(), nil
	}
	var out []release.HeldSlot
	for _, ns := range s.namespaces() {
		slots, err := s.Store.HeldSlots(ctx, ns)
		if err != nil {
			return nil, err
		}
		out = append(out, slots...)
	}
	return out, nil
}
