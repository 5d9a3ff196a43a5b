package notifier

import (
	"context"
	"fmt"
	"time"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/wallclock"
)

// freeHeldSlots frees the MAX_QUEUED slots that queued records with a final status label
// hold (release.HeldSlot): a final payload loses its queued label at once; a pending one
// (a waiting reservation whose status label was flipped) is left to run when delivered, and
// failed once past QUEUE_DEADLINE like any revision that never started. Without it, seals a
// tenant read once and wrote back onto its finished records held its namespace's bound,
// and the cluster's, for as long as it liked.
func (s *Service) freeHeldSlots(ctx context.Context, res *SweepResult) {
	slots, err := s.heldSlots(ctx)
	if err != nil {
		s.Log.Warnw("list queued revisions with a final status label", "error", err)
		return
	}
	now := wallclock.Or(s.Clock).Now()
	for _, h := range slots {
		if err := s.freeHeldSlot(ctx, h, now, res); err != nil {
			s.Log.Warnw("free a held queue slot", "namespace", h.Namespace, "secret", h.SecretName, "error", err)
		}
	}
}

func (s *Service) heldSlots(ctx context.Context) ([]release.HeldSlot, error) {
	if s.watching {
		return s.Revisions.HeldSlots(), nil
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

func (s *Service) freeHeldSlot(ctx context.Context, h release.HeldSlot, now time.Time, res *SweepResult) error {
	name, rev, ok := release.ParseSecretName(h.SecretName)
	if !ok {
		return nil
	}
	dropped, err := s.Store.UnqueueFinal(ctx, h.Namespace, name, rev)
	if err != nil {
		return err
	}
	if dropped {
		res.Unqueued++
		s.Log.Infow("queued label dropped from a final record", "namespace", h.Namespace, "secret", h.SecretName)
		return nil
	}
	if now.Sub(h.Created) < s.Sweep.QueueDeadline {
		return nil
	}
	changed, err := s.Store.MarkFailed(ctx, h.Namespace, name, rev, fmt.Sprintf(
		"Release %q failed: revision %d never started and was still queued past the queue deadline, its status label rewritten (marked failed by the notifier)",
		name, rev), release.KeepFailed)
	if changed {
		res.Failed++
	}
	return err
}
