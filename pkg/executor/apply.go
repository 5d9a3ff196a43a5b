package executor

import (
	"context"
	"errors"
	"fmt"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
)

// apply makes the writes of a delivery's verdict: the one place that acts on what decide chose.
func (s *Service) apply(ctx context.Context, act *action, vd verdict) (Outcome, bool, error) {
	if vd.note != "" {
		if vd.warn {
			act.log.Warnw(vd.note, vd.kv...)
		} else {
			act.log.Infow(vd.note, vd.kv...)
		}
	}
	switch vd.do {
	case deedGone:
		s.bindGone(ctx, act)
		return OutcomeGone, true, nil
	case deedDuplicate:
		s.bindFinal(ctx, act)
		return OutcomeDuplicate, true, nil
	case deedStale:
		return OutcomeStale, true, nil
	case deedHeldElsewhere:
		return "", true, fmt.Errorf("%w: %s/%s", ErrHeldElsewhere, act.Namespace, act.SecretName)
	case deedRefuse:
		return OutcomeRefused, true, nil
	case deedFailRefused:
		if _, err := s.Store.MarkFailed(ctx, act.Namespace, act.Name, act.Revision, vd.reason, release.KeepFailed); err != nil {
			// Redelivered: the next delivery is refused again and retries the write.
			return "", true, fmt.Errorf("fail refused revision %s/%s: %w", act.Namespace, release.SecretName(act.Name, act.Revision), err)
		}
		act.log.Infow("refused revision marked failed; it no longer counts toward admission", "why", vd.why)
		return OutcomeRefused, true, nil
	case deedFailNotLatest, deedCancelled:
		return s.failUnrun(ctx, act, vd)
	case deedFailResumes:
		if _, err := s.Store.MarkFailed(ctx, act.Namespace, act.Name, act.Revision, vd.reason, release.ReplaceFailed); err != nil {
			return "", true, err
		}
		s.markDone(ctx, act, OutcomeFailed)
		return OutcomeFailed, true, nil
	}
	return s.prepare(ctx, act)
}

// failUnrun fails a record Helm never ran for. With markDone the request's outcome is
// recorded first, in async-helm's namespace: if failing the record fails, the redelivery is
// refused, never resumed, whatever the tenant makes of the record meanwhile.
func (s *Service) failUnrun(ctx context.Context, act *action, vd verdict) (Outcome, bool, error) {
	if vd.markDone {
		outcome := string(OutcomeFailed)
		if vd.do == deedCancelled {
			outcome = consumed.OutcomeCancelled
		}
		if err := s.Consumed.MarkDone(ctx, act.RequestID, outcome); err != nil {
			return "", true, err // redelivered: not resumed while it does not count
		}
	}
	if _, err := s.Store.MarkFailed(ctx, act.Namespace, act.Name, act.Revision, vd.reason, release.ReplaceFailed); err != nil {
		return "", true, err // redelivered: the request has its outcome, the write is retried
	}
	return OutcomeFailed, true, nil
}

// prepare makes the writes before Helm runs: an uninstall's tombstone and the running
// action on the Lease.
func (s *Service) prepare(ctx context.Context, act *action) (Outcome, bool, error) {
	if act.resumed {
		act.log.Infow("request already bound to this record; resuming")
	}
	if act.Action.Action == release.ActionUninstall {
		var err error
		if act.grave, err = s.digTombstone(ctx, act); err != nil {
			return "", true, err
		}
	}
	// Submit answers a cancel it cannot honour (an uninstall) with 409.
	if _, err := act.held.Sync(ctx, AnnotationAction, string(act.Action.Action)); err != nil {
		act.log.Warnw("running action not written on the lease", "error", err)
	}
	return "", false, nil
}

// bindGone binds a request whose reservation is gone (deleted, or made again with another
// UID) to the Secret it was accepted for, outcome gone: it can never run, and its ledger
// entry stops counting now instead of at its TTL.
func (s *Service) bindGone(ctx context.Context, act *action) {
	if s.Consumed == nil || act.BoundSecretUID == "" {
		return
	}
	meta, err := s.Store.SecretMeta(ctx, act.Namespace, act.SecretName)
	if err != nil || (meta != nil && meta.GetUID() == act.BoundSecretUID) {
		return // not known, or the Secret it was accepted for is there: nothing to bind
	}
	s.bindUnrun(ctx, act, string(OutcomeGone))
}

// outcomeRewritten is the consumed record's outcome of a request whose reservation was
// final before it was consumed (a tenant rewrote its status): it never runs.
const outcomeRewritten = "refused: reservation rewritten"

// bindFinal binds the request of a final record to the Secret it was accepted for: a
// request run here is bound already (nothing changes); one never consumed was made final
// by someone else and can never run, so its ledger entry stops counting now.
func (s *Service) bindFinal(ctx context.Context, act *action) {
	if s.Consumed == nil || act.BoundSecretUID == "" {
		return
	}
	s.bindUnrun(ctx, act, outcomeRewritten)
}

// bindUnrun binds act's request to its accepted Secret with outcome, unless it was bound.
func (s *Service) bindUnrun(ctx context.Context, act *action, outcome string) {
	first, err := s.Consumed.Consume(ctx, s.binding(act, act.BoundSecretUID))
	if err == nil && first {
		err = s.Consumed.MarkDone(ctx, act.RequestID, outcome)
	}
	if err != nil && !errors.Is(err, consumed.ErrConsumedElsewhere) {
		act.log.Warnw("request that can no longer run not bound; its ledger entry counts until it expires",
			"outcome", outcome, "error", err)
	}
}
