package executor

import (
	"context"
	"time"

	"go.uber.org/zap"
	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/fairqueue"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/lease"
	"github.com/async-helm/async-helm/pkg/wallclock"
)

// action is one accepted event's handling: the steps below share it, and with it one
// lease lifetime and one read of the record (taken under the lease).
type action struct {
	events.Action
	stored []byte
	log    *zap.SugaredLogger
	rec    *helmrelease.Release // the record, as read under the lease
	held   Lease
	end    *ending
	grave  lease.Tombstone // an uninstall's tombstone
	// attempt is the request's attempt this action is (remediate.go): 1, or a retry's.
	attempt int
	// resumed: the request was bound to this record by an earlier delivery.
	resumed bool
	// seat is the handling's action slot (every attempt's).
	seat *fairqueue.Seat
}

// handle runs the steps: admit (decide.go: the record before and under the lease, the
// consumed request, a cancel already asked), run, record.
func (s *Service) handle(reqCtx, shutdown context.Context, a events.Action, stored []byte, seat *fairqueue.Seat) (Outcome, error) {
	act := &action{Action: a, stored: stored, seat: seat,
		log: s.Log.With("namespace", a.Namespace, "release", a.Name, "revision", a.Revision, "requestId", a.RequestID)}
	defer s.releaseLease(reqCtx, act)
	if outcome, done, err := s.admit(reqCtx, act); done {
		return outcome, err
	}
	start := wallclock.Or(s.Clock).Now()
	outcome := s.attempts(reqCtx, shutdown, act) // the action, and its retries and remediation
	s.markDone(reqCtx, act, outcome)
	act.log.Infow("action finished", "outcome", outcome, "duration", wallclock.Or(s.Clock).Now().Sub(start))
	if s.Observe != nil {
		s.Observe(string(a.Action), string(outcome), wallclock.Or(s.Clock).Now().Sub(start))
	}
	return outcome, nil
}

// admit decides, from the record before and under the lease and from the consumed records,
// whether Helm runs, and writes what the verdict says; done is true when the handling ends
// here (decide.go).
func (s *Service) admit(ctx context.Context, act *action) (Outcome, bool, error) {
	v := &view{a: act.Action, checked: s.Consumed != nil}
	for {
		vd := decide(v)
		if vd.ask == qNone {
			return s.apply(ctx, act, vd)
		}
		if err := s.gather(ctx, act, v, vd.ask); err != nil {
			return "", true, err
		}
	}
}

// releaseLease gives the lease back, if held, unless it was lost (another executor owns it now).
func (s *Service) releaseLease(reqCtx context.Context, act *action) {
	if act.held == nil || (act.end != nil && act.end.lost()) {
		return
	}
	// Its own short context: the request's may be over.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(reqCtx), 15*time.Second)
	defer cancel()
	if err := act.held.Release(ctx); err != nil {
		act.log.Warnw("lease not released; it expires by itself", "error", err)
	}
}

// digTombstone writes an uninstall's tombstone before Helm deletes the records: it is what
// reports "uninstalled" once they are gone (docs/design.md).
func (s *Service) digTombstone(ctx context.Context, act *action) (lease.Tombstone, error) {
	rel := act.rec
	chartLabel := rel.Labels[release.LabelChart]
	if chartLabel == "" && rel.Chart != nil && rel.Chart.Metadata != nil { // a release plain helm installed
		chartLabel = release.ChartLabel(rel.Chart.Metadata.Name, rel.Chart.Metadata.Version)
	}
	return s.Store.DigTombstone(ctx, lease.Tombstone{Namespace: act.Namespace, Name: act.Name,
		Revision: act.Revision, RequestID: act.RequestID, Chart: chartLabel})
}
