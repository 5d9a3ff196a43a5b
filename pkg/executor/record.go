package executor

import (
	"context"
	"errors"
	"fmt"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/actionlog"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
)

// record writes the outcome: the reason of a failure (through the store, not the action's
// sealed storage), an uninstall's tombstone.
func (s *Service) record(reqCtx context.Context, act *action, res result) Outcome {
	// Final writes get their own short context: the action's may be cancelled already.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(reqCtx), 15*time.Second)
	defer cancel()
	kind, detail := act.end.get()
	switch {
	case kind == endLost:
		// Another executor owns the revision now: its outcome is the one that counts.
		act.log.Warnw("action abandoned after losing the lease", "reason", detail, "error", res.err)
		return OutcomeFailed
	case res.err != nil:
		if marked, seen := s.recordFailure(ctx, act, res.err, res.logs); marked || seen != helmrelease.StatusDeployed || act.Action.Action == release.ActionUninstall {
			return OutcomeFailed
		}
		// Helm's final write landed before the error (a lost answer): the record says
		// deployed, and the request's outcome must say the same.
		act.log.Warnw("Helm returned an error after its record was deployed; the record stands", "error", res.err)
	case kind != notEnded:
		// Helm returned as the action ended: its last write may have been refused (Helm
		// ignores a failed final write). Still pending means it was.
		if marked, _ := s.recordFailure(ctx, act, errors.New("the action ended as Helm finished"), res.logs); marked {
			return OutcomeFailed
		}
	}
	switch {
	case act.Action.Action == release.ActionUninstall:
		s.finishUninstall(ctx, act)
		return OutcomeUninstalled
	case res.final != nil && res.final.Info.Status != helmrelease.StatusDeployed:
		return OutcomeFailed
	}
	return OutcomeDeployed
}

// markDone records on the request's consumed record that its action ran to its end, so no
// later delivery resumes it (decideResume). An uninstall's success is recorded before its
// tombstone (finishUninstall); an action abandoned to another executor is that one's.
func (s *Service) markDone(reqCtx context.Context, act *action, outcome Outcome) {
	if s.Consumed == nil || outcome == OutcomeUninstalled || (act.end != nil && act.end.lost()) {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(reqCtx), 15*time.Second)
	defer cancel()
	if err := s.Consumed.MarkDone(ctx, act.RequestID, string(outcome)); err != nil {
		act.log.Warnw("outcome not recorded on the consumed request", "error", err)
	}
}

// finishUninstall records that Helm's uninstall succeeded: first on the request's consumed
// record, which the notifier takes "uninstalled" from (the tombstone Lease is the tenant's
// to write; finished alone, it looks forged), then on the tombstone, which makes the
// notifier look now.
func (s *Service) finishUninstall(ctx context.Context, act *action) {
	if s.Consumed != nil {
		if err := s.Consumed.MarkDone(ctx, act.RequestID, consumed.OutcomeUninstalled); err != nil {
			act.log.Errorw("uninstall outcome not recorded; no \"uninstalled\" event will be sent", "error", err)
			return
		}
	}
	if err := s.Store.FinishTombstone(ctx, act.grave); err != nil {
		act.log.Warnw("tombstone not finished; the notifier reports it once the lease is gone", "error", err)
	}
}

// recordFailure marks the revision failed with the reason, and reports whether it did (a
// revision already final is left alone) and the status it left alone.
func (s *Service) recordFailure(ctx context.Context, act *action, runErr error, logs *actionlog.Buffer) (bool, helmrelease.Status) {
	kind, detail := act.end.get()
	reason, ifFailed := runErr.Error(), release.ReplaceFailed
	switch {
	case kind == endCancel:
		reason = failed(act.Name, fmt.Sprintf("cancelled by %s (%v)", detail, runErr))
	case kind == endTimeout:
		reason = failed(act.Name, fmt.Sprintf("timed out after %s (%v)", detail, runErr))
	case kind == endShutdown:
		reason = failed(act.Name, fmt.Sprintf("the executor shut down while the action ran (%v)", runErr))
	case errors.Is(runErr, helmexec.ErrRenderTimeout):
		reason = failed(act.Name, runErr.Error())
	default:
		ifFailed = release.KeepFailed // Helm's own description of the failure stands
	}
	seen, marked, err := s.Store.MarkFailedSeeing(ctx, act.Namespace, act.Name, act.Revision, reason, ifFailed)
	if err != nil {
		act.log.Errorw("could not record the failure; the notifier's sweeper will", "error", err)
	}
	if act.Action.Action == release.ActionUninstall {
		if err := s.Store.BuryTombstone(ctx, act.grave); err != nil {
			act.log.Warnw("tombstone of the failed uninstall left; the notifier removes it", "error", err)
		}
	}
	act.log.Warnw("action failed", "error", runErr, "helmLog", logs.TailText(200))
	return marked || err != nil, seen
}
