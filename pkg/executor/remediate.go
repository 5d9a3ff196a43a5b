package executor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/fairqueue"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

// Retries and remediation of a failed install or upgrade (docs/design.md, "Retries and
// remediation"): every retry is a new revision reserved by this executor under the same
// request id, each step claimed once on the request's consumed record.

// reserver reserves a revision as submit does (release.Store).
type reserver interface {
	Reserve(ctx context.Context, r release.Reservation) (*corev1.Secret, error)
}

// setupTimeout bounds the writes that open a retry or a remediation.
const setupTimeout = 30 * time.Second

// chain is one request's attempts after the first: cur is the latest, whose lease the
// chain releases unless it is the first's (handle releases that one).
type chain struct {
	s     *Service
	cur   *action
	owned bool
	total int
	// desc is the request's own description (each attempt's carries its number).
	desc string
	// shutdown is the executor's: the chain's actions end with it.
	shutdown context.Context
	// wait ends the wait for the slots of the step after a failed attempt (start).
	wait context.Context
}

// attempts runs the action, then, while it fails and the request allows, its retries and
// finally its remediation. The outcome is the last attempt's.
func (s *Service) attempts(reqCtx, shutdown context.Context, act *action) Outcome {
	act.attempt = 1
	if r := act.Action.Options.Retries; r > 0 && remediable(act.Action.Action) {
		act.Action.Attempt = fmt.Sprintf("1 of %d", r+1)
	}
	res := s.execute(reqCtx, shutdown, act)
	outcome := s.record(reqCtx, act, res)
	o := act.Action.Options
	if o.Retries <= 0 && o.Remediation == api.RemediationNone {
		return outcome
	}
	if !remediable(act.Action.Action) {
		return outcome
	}
	c := &chain{s: s, cur: act, total: o.Retries + 1, desc: o.Description, shutdown: shutdown}
	defer c.moveTo(reqCtx, nil)
	for outcome == OutcomeFailed {
		then := afterFailure(c.cur, res, shutdown, c.total)
		if then == stepStop {
			return outcome
		}
		next, err := c.start(reqCtx, then)
		if err != nil {
			c.noRetry(reqCtx, err)
		}
		if next == nil {
			return outcome
		}
		c.moveTo(reqCtx, next)
		res = s.execute(reqCtx, shutdown, next)
		outcome = s.record(reqCtx, next, res)
	}
	return outcome
}

// start runs what follows a failed attempt up to its start: the wait for an action slot
// again and for a CPU slot for its setup, together at most queueWait, as a delivery waits
// before its first attempt; then the retry's next attempt (returned), or the remediation
// (run here; nil).
func (c *chain) start(reqCtx context.Context, then step) (*action, error) {
	d := c.s.queueWait(c.cur.Action)
	wait, stop := bounded(c.shutdown, c.s.afterFunc, d, fmt.Errorf("none within %s", d))
	defer stop()
	c.wait = wait
	if err := c.requeue(then); err != nil {
		return nil, err
	}
	if then == stepRemediate {
		c.remediate(reqCtx)
		return nil, nil
	}
	return c.retry(reqCtx)
}

// requeue gives the action slot back to the tenants' queue between attempts and waits for
// one again in the request's flow, unless nothing more runs (no remediation).
func (c *chain) requeue(then step) error {
	if c.cur.seat == nil || (then == stepRemediate && c.cur.Action.Options.Remediation == api.RemediationNone) {
		return nil
	}
	err := c.cur.seat.Requeue(c.wait)
	switch {
	case errors.Is(err, fairqueue.ErrFull):
		return fmt.Errorf("no place to wait for an action slot: the executor's waiting room is full and its tenant waits the most there (%w)", err)
	case c.shutdown.Err() != nil:
		return fmt.Errorf("the executor shut down while the request queued for a slot: %w", err)
	case err != nil:
		return fmt.Errorf("no action slot for the request's next step: %w", context.Cause(c.wait))
	}
	return nil
}

// remediable: the actions that take retries and remediation.
func remediable(a release.Action) bool {
	return a == release.ActionInstall || a == release.ActionUpgrade
}

// step is what follows a failed attempt.
type step int

const (
	stepStop      step = iota // a cancel, a lost lease, shutdown: nothing more runs
	stepRetry                 // another attempt
	stepRemediate             // the remediation (none: the chain ends failed)
)

// afterFailure says what follows a failed attempt: nothing after the executor's own ends or the
// user's cancel; the remediation after the last attempt or a failure no retry can fix (the
// chart, its render); else a retry.
func afterFailure(cur *action, res result, shutdown context.Context, total int) step {
	kind, _ := cur.end.get()
	switch {
	case kind == endCancel || kind == endLost || kind == endShutdown || shutdown.Err() != nil:
		return stepStop
	case cur.attempt >= total, errors.Is(res.err, helmexec.ErrRenderTimeout),
		errors.Is(res.err, helmexec.ErrChartChanged), errors.Is(res.err, helmexec.ErrMissingDependency),
		errors.Is(res.err, helmexec.ErrNoRollbackPin),
		errors.Is(res.err, helmexec.ErrManifestsTooLarge), errors.Is(res.err, storage.ErrManifestsTooLarge):
		return stepRemediate
	}
	return stepRetry
}

// moveTo makes next the chain's latest attempt, releasing the lease of the one before
// (unless it is the first's); nil ends the chain.
func (c *chain) moveTo(reqCtx context.Context, next *action) {
	if c.owned {
		c.s.releaseLease(reqCtx, c.cur)
	}
	if next != nil {
		c.cur, c.owned = next, true
	}
}

// retry opens the next attempt: claimed, its revision's lease held, its revision reserved,
// the failed one saying where the request went on.
func (c *chain) retry(reqCtx context.Context) (next *action, err error) {
	err = c.inCPUSlot(c.wait, func() error {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(reqCtx), setupTimeout)
		defer cancel()
		k := c.cur.attempt + 1
		a := c.cur.Action
		a.Options.Description = attemptDescription(a, c.desc, k, c.total)
		a.Attempt = fmt.Sprintf("%d of %d", k, c.total)
		meta := c.cur.rec.Chart.Metadata
		if next, err = c.open(ctx, a, consumed.Step{Attempt: k},
			release.Reservation{Action: a.Action, Chart: meta, Values: a.Values}); err != nil {
			return err
		}
		next.attempt = k
		c.note(ctx, fmt.Sprintf("attempt %d of %d; retried as revision %d", c.cur.attempt, c.total, next.Revision))
		return nil
	})
	return next, err
}

// inCPUSlot runs fn holding a CPU slot of the request's flow, waited for until wait ends: a
// step's setup decodes records the tenant can write and writes the request's, CPU-bound
// work accounted to the tenant (docs/design.md, "Tenants and shares").
func (c *chain) inCPUSlot(wait context.Context, fn func() error) error {
	seat, err := c.s.cpu.Acquire(wait, flowOf(c.cur.Action))
	if err != nil {
		return fmt.Errorf("no CPU slot for the request's next step: %w", context.Cause(wait))
	}
	defer seat.Release()
	return fn()
}

// noRetry says on the failed attempt why the request stops there, unless another executor
// claimed the retry (it goes on there, and says so itself).
func (c *chain) noRetry(reqCtx context.Context, err error) {
	c.cur.log.Warnw("no retry", "attempt", c.cur.attempt, "of", c.total, "error", err)
	if errors.Is(err, consumed.ErrStepTaken) {
		return
	}
	c.noteAlone(reqCtx, fmt.Sprintf("attempt %d of %d; not retried: %v", c.cur.attempt, c.total, err))
}

// attemptDescription is what attempt k of total is described with once it succeeded: the
// request's description (desc), or Helm's, with the attempt.
func attemptDescription(a events.Action, desc string, k, total int) string {
	if desc == "" {
		desc = "Install complete"
		if a.Action == release.ActionUpgrade {
			desc = "Upgrade complete"
		}
	}
	return fmt.Sprintf("%s (attempt %d of %d)", desc, k, total)
}

// open reserves the revision after the chain's latest for a (its action, options) and
// returns it held: the latest must still be the failed attempt, the step is claimed on the
// request's consumed record, the revision's lease is taken before it is reserved.
func (c *chain) open(ctx context.Context, a events.Action, st consumed.Step, r release.Reservation) (*action, error) {
	s, cur := c.s, c.cur
	res, err := c.reserver(a)
	if err != nil {
		return nil, err
	}
	if err := c.checkLatest(ctx); err != nil {
		return nil, err
	}
	// The bound of every reserved revision (release.MaxRevision), checked before the step
	// is claimed: a refused step stays unclaimed. The step is on the revision opened.
	if a.Revision, err = release.NextAfter(a.Namespace, a.Name, cur.Revision); err != nil {
		return nil, err
	}
	st.Revision = a.Revision
	if s.Consumed != nil {
		if err := s.Consumed.ClaimStep(ctx, a.RequestID, st); err != nil {
			return nil, err
		}
	}
	a.SecretName = release.SecretName(a.Name, a.Revision)
	held, err := s.Heartbeat.Hold(ctx, a.Namespace, release.LeaseName(a.Name, a.Revision), a.RequestID)
	if err != nil || held == nil {
		return nil, fmt.Errorf("hold the lease of revision %d: %w (held elsewhere: %v)", a.Revision, err, held == nil)
	}
	next := &action{Action: a, held: held, seat: cur.seat,
		log: s.Log.With("namespace", a.Namespace, "release", a.Name, "revision", a.Revision, "requestId", a.RequestID)}
	r.Namespace, r.Name, r.RequestID, r.Revision = a.Namespace, a.Name, a.RequestID, a.Revision
	reserved, err := res.Reserve(ctx, r)
	if err == nil {
		// The step's writes are sealed for the Secret it reserved (run.go), not the first's.
		next.BoundSecretUID = reserved.UID
		next.rec, err = s.Store.Get(ctx, a.Namespace, a.Name, a.Revision)
	}
	if err != nil {
		s.releaseLease(ctx, next)
		return nil, fmt.Errorf("reserve revision %d: %w", a.Revision, err)
	}
	next.log.Infow("request goes on as a new revision", "after", cur.Revision, "action", a.Action)
	return next, nil
}

// reserver writes a retry's revision as the caller, as Helm run as the caller writes the
// release records (the executor's own role may not create Secrets; submit checked that the
// caller may); a trusted local run without a caller uses the executor's store.
func (c *chain) reserver(a events.Action) (reserver, error) {
	if a.Caller.User != "" {
		client, err := c.s.Helm.Client(c.s.callerOptions(a)...)
		if err != nil {
			return nil, fmt.Errorf("a client as %s: %w", a.Caller.User, err)
		}
		return &release.Store{Client: client, Clock: c.s.Clock}, nil
	}
	return c.s.Store, nil
}

// checkLatest refuses to go on when the failed attempt is no longer the release's latest
// revision, or is not failed (someone acted on the release meanwhile).
func (c *chain) checkLatest(ctx context.Context) error {
	revs, err := c.s.Store.LiveHistory(ctx, c.cur.Namespace, c.cur.Name)
	if err != nil {
		return err
	}
	if len(revs) == 0 || revs[0].Version != c.cur.Revision || revs[0].Status != helmrelease.StatusFailed.String() {
		return fmt.Errorf("revision %d is no longer the release's latest failed revision", c.cur.Revision)
	}
	return nil
}

// note appends to the failed attempt's description what the request did next.
func (c *chain) note(ctx context.Context, what string) {
	cur := c.cur
	rel, err := c.s.Store.Get(ctx, cur.Namespace, cur.Name, cur.Revision)
	if err == nil {
		_, err = c.s.Store.MarkFailed(ctx, cur.Namespace, cur.Name, cur.Revision,
			fmt.Sprintf("%s (%s)", strings.TrimSpace(rel.Info.Description), what), release.ReplaceFailed)
	}
	if err != nil {
		cur.log.Warnw("the failed attempt's description was not completed", "what", what, "error", err)
	}
}

// remediate runs the request's remediation after its last failed attempt.
func (c *chain) remediate(reqCtx context.Context) {
	var err error
	switch c.cur.Action.Options.Remediation {
	case api.RemediationNone:
		if c.total > 1 {
			c.noteAlone(reqCtx, fmt.Sprintf("attempt %d of %d", c.cur.attempt, c.total))
		}
		return
	case api.RemediationRollback:
		err = c.rollback(reqCtx)
	case api.RemediationUninstall:
		err = c.uninstall(reqCtx)
	default:
		err = fmt.Errorf("unknown remediation %q", c.cur.Action.Options.Remediation)
	}
	if err != nil {
		c.cur.log.Warnw("remediation not run", "remediation", c.cur.Action.Options.Remediation, "error", err)
	}
}

// noteAlone is note in its own setup bound and a CPU slot waited for within it.
func (c *chain) noteAlone(reqCtx context.Context, what string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(reqCtx), setupTimeout)
	defer cancel()
	if err := c.inCPUSlot(ctx, func() error { c.note(ctx, what); return nil }); err != nil {
		c.cur.log.Warnw("the failed attempt's description was not completed", "what", what, "error", err)
	}
}

// rollback reserves a pending-rollback revision after the failed attempt and runs Helm's
// rollback to the record submit pinned when it accepted the request (the revision the
// upgrade started from), refused when that record was rewritten since.
func (c *chain) rollback(reqCtx context.Context) error {
	var next *action
	var target *helmrelease.Release
	err := c.inCPUSlot(c.wait, func() (err error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(reqCtx), setupTimeout)
		defer cancel()
		if target, err = c.pinnedTarget(ctx); err != nil {
			c.note(ctx, fmt.Sprintf("attempt %d of %d; no rollback: %v", c.cur.attempt, c.total, err))
			return err
		}
		a := c.cur.Action
		a.Action, a.RollbackTo, a.ReuseChart, a.ChartDigest = release.ActionRollback, target.Version, true, ""
		a.Options.Description, a.Attempt = "", ""
		if next, err = c.open(ctx, a, consumed.Step{Remediation: api.RemediationRollback},
			release.Reservation{Action: release.ActionRollback, Chart: target.Chart.Metadata, Values: target.Config}); err != nil {
			return err
		}
		c.note(ctx, fmt.Sprintf("attempt %d of %d; remediated by rollback to %d as revision %d",
			c.cur.attempt, c.total, target.Version, next.Revision))
		return nil
	})
	if err != nil {
		return err
	}
	c.moveTo(reqCtx, next)
	outcome := c.s.record(reqCtx, next, c.s.execute(reqCtx, c.shutdown, next))
	next.log.Infow("remediation finished", "remediation", api.RemediationRollback, "to", target.Version, "outcome", outcome)
	return nil
}

// pinnedTarget gathers the record the request pinned and decides whether it may be
// restored (checkTarget).
func (c *chain) pinnedTarget(ctx context.Context) (*helmrelease.Release, error) {
	pin := c.cur.Action.RollbackPin
	var target *helmrelease.Release
	var method string
	if pin != nil && pin.Revision > 0 {
		var err error
		// One read: the apply method of the record whose chart and manifest the pin checks.
		if target, method, err = c.s.Store.GetWithApplyMethod(ctx, c.cur.Namespace, c.cur.Name, pin.Revision); err != nil {
			return nil, fmt.Errorf("read revision %d, the rollback target: %w", pin.Revision, err)
		}
	}
	if err := checkTarget(pin, target, method); err != nil {
		return nil, err
	}
	return target, nil
}

// checkTarget decides whether target may be restored by a remediation: only the record
// pinned at acceptance, unchanged (a Secret of the tenant's namespace, which a namespace
// editor may rewrite into anything the caller may create).
func checkTarget(pin *release.Pin, target *helmrelease.Release, applyMethod string) error {
	switch {
	case pin == nil:
		return errors.New("no rollback target was pinned when the request was accepted")
	case pin.Revision == 0 || target == nil:
		return errors.New("no revision was deployed when the request was accepted")
	case target.Chart == nil || target.Chart.Metadata == nil:
		return fmt.Errorf("revision %d records no chart", target.Version)
	}
	return pin.Check(target, applyMethod)
}

// uninstall runs Helm's uninstall of the release after its last failed attempt, under that
// attempt's lease: its records are purged, the failed attempts with them. The setup and
// Helm hold a CPU slot of the request's flow, given back while Helm waits (delete hooks),
// as run's actions do.
func (c *chain) uninstall(reqCtx context.Context) error {
	cur := c.cur
	phase := &cpuPhase{cpu: c.s.cpu, flow: flowOf(cur.Action), action: cur.seat, ctx: c.shutdown,
		firstWait: c.s.queueWait(cur.Action), after: c.s.afterFunc}
	if err := phase.enter(); err != nil {
		return fmt.Errorf("no CPU slot for the request's remediation: %w", err)
	}
	defer phase.leave()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(reqCtx), setupTimeout)
	defer cancel()
	if err := c.checkLatest(ctx); err != nil {
		return err
	}
	if c.s.Consumed != nil {
		if err := c.s.Consumed.ClaimStep(ctx, cur.RequestID, consumed.Step{Remediation: api.RemediationUninstall}); err != nil {
			return err
		}
	}
	c.note(ctx, fmt.Sprintf("attempt %d of %d; remediated by uninstall", cur.attempt, c.total))
	timeout := c.s.timeout(cur.Action)
	uctx, ucancel := context.WithTimeout(context.WithoutCancel(reqCtx), timeout+setupTimeout)
	defer ucancel()
	req := helmexec.Request{Namespace: cur.Namespace, Name: cur.Name, Revision: cur.Revision, Timeout: timeout,
		Description: "Uninstalled as the remediation of request " + cur.RequestID, DeleteHooks: helmexec.DeleteHooks{Key: c.s.SealKey}}
	opts := append(append([]helmexec.Option{helmexec.WithWaitGate(phase), helmexec.WithAPIGate(phase)}, c.s.HelmOptions...), c.s.callerOptions(cur.Action)...)
	if _, err := c.s.Helm.Uninstall(uctx, req, opts...); err != nil {
		return err
	}
	cur.log.Infow("remediation finished", "remediation", api.RemediationUninstall)
	return nil
}
