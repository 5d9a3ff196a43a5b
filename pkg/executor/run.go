package executor

import (
	"context"
	"fmt"
	"time"
	"weak"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/async-helm/async-helm/pkg/actionlog"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/progress"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/wallclock"
)

// execute runs Helm with the action's ends wired: its deadline, shutdown, the lease lost,
// a cancel asked on the Lease. The action outlives the delivery's context (a broker timing
// out must not abort a half-done install) but not any of those.
func (s *Service) execute(reqCtx, shutdown context.Context, act *action) result {
	ctx, cancel := context.WithCancel(context.WithoutCancel(reqCtx))
	defer cancel()
	act.end = &ending{fence: &helmexec.Fence{Orphans: s.Orphans}, cancel: cancel}
	timeout := s.timeout(act.Action)
	// The deadline runs from Helm's start: time spent waiting for a CPU slot is the
	// executor's own queue, not the user's timeout (docs/design.md, "Slots").
	clock := &actionClock{start: func() func() {
		return s.afterFunc(timeout, func() { act.end.end(endTimeout, timeout.String()) })
	}}
	defer clock.stop()
	stopShutdown := context.AfterFunc(shutdown, func() { act.end.end(endShutdown, "") })
	defer stopShutdown()

	hbCtx, hbCancel := context.WithCancel(ctx)
	defer hbCancel()
	lose := func(reason string) {
		act.log.Warnw("lease lost; cancelling the action", "reason", reason)
		act.end.end(endLost, reason)
	}
	go act.held.Keep(hbCtx, lose)
	logs := actionlog.NewBuffer(actionlog.FailureLogBytes, nil)
	phases := progress.NewPhases(logs.Log)
	go s.watch(hbCtx, act.held, phases, act.Action, wallclock.Or(s.Clock).Now(), lose, func(by string) bool {
		if act.Action.Action == release.ActionUninstall {
			// Helm deletes in one call; stopping it midway would leave half a release.
			act.log.Infow("cancel requested on a running uninstall; it runs to its end", "by", by)
			return false
		}
		act.log.Infow("cancel requested; stopping the action", "by", by)
		act.end.end(endCancel, by)
		return true
	})
	alog := s.startActionLog(hbCtx, act)
	final, err := s.run(ctx, act, runOptions{timeout: timeout, started: clock.begin, logf: alog.tee(phases.Log)})
	alog.finish(reqCtx, err)
	return result{final: final, err: err, logs: logs}
}

// result is what Helm answered, and its debug log.
type result struct {
	final *helmrelease.Release
	err   error
	logs  *actionlog.Buffer
}

// callerOptions make Helm (and the progress reads) act as the user who asked.
func (s *Service) callerOptions(a events.Action) []helmexec.Option {
	if a.Caller.User == "" {
		return nil
	}
	return []helmexec.Option{helmexec.WithImpersonation(a.Caller.User, a.Caller.UID, a.Caller.Groups, a.Caller.Extra)}
}

// run maps the action onto Helm, behind the action's fence, holding a CPU slot except
// while Helm waits.
func (s *Service) run(ctx context.Context, act *action, o runOptions) (*helmrelease.Release, error) {
	// The chart is downloaded and loaded before a CPU slot is taken: a download waits on a
	// server the caller chose, a load for one of the chart source's load slots (each bounded
	// there: time, size, its slots per tenant), and neither may hold one of the few CPU slots
	// every tenant needs.
	ch, free, err := s.loadChart(ctx, act)
	if err != nil {
		return nil, err
	}
	defer free()
	values, err := s.actionValues(ctx, act.Action)
	if err != nil {
		return nil, err
	}
	phase := &cpuPhase{cpu: s.cpu, flow: flowOf(act.Action), action: act.seat, ctx: ctx,
		firstWait: s.queueWait(act.Action), after: s.afterFunc}
	if err := phase.enter(); err != nil {
		return nil, fmt.Errorf("waiting for a CPU slot: %w", err)
	}
	defer phase.leave()
	if o.started != nil {
		o.started()
	}
	a := act.Action
	req := s.helmRequest(act, values, o.timeout)
	opts := s.helmOptions(act, o.logf, phase)
	switch {
	case a.Action == release.ActionUninstall:
		req.DeleteHooks = helmexec.DeleteHooks{Key: s.SealKey, Disabled: a.Options.NoHooks}
		return s.Helm.Uninstall(ctx, req, opts...)
	case a.Action == release.ActionRollback:
		return s.Helm.Rollback(ctx, req, opts...)
	case ch != nil:
		// The chart's copy Helm runs (its dependencies are checked there), the record's labels of it.
		req.Chart = ch
		req.Labels = release.Labels(a.RequestID, a.Revision, ch.Metadata.Name, ch.Metadata.Version)
	}
	if a.Action == release.ActionUpgrade {
		return s.Helm.Upgrade(ctx, req, opts...)
	}
	return s.Helm.Install(ctx, req, opts...)
}

// helmRequest is the Helm request of one attempt of act, with the values it resolved.
func (s *Service) helmRequest(act *action, values map[string]any, timeout time.Duration) helmexec.Request {
	a := act.Action
	req := helmexec.Request{
		Namespace: a.Namespace, Name: a.Name, Revision: a.Revision, Values: values,
		ReuseValues: a.Options.ReuseValues, Annotate: recordValuesFrom(a),
		Timeout: timeout, Wait: a.Options.Wait, WaitForJobs: a.Options.WaitForJobs,
		Atomic: a.Options.Atomic, Description: a.Options.Description,
		MaxHistory: s.MaxHistory, ChartDigest: a.ChartDigest, RollbackTo: a.RollbackTo, RollbackPin: a.RollbackPin, ValuesPin: a.ValuesPin,
		RenderTimeout: s.RenderTimeout, Replace: act.attempt > 1, // a retry installs over the failed attempt
		ServerSide: a.Options.ServerSide, ForceConflicts: a.Options.ForceConflicts,
	}
	// The record's chart label stays, unless a chart is fetched (its own then): a rollback
	// runs the target's chart, a reused chart the deployed one.
	meta := act.rec.Chart.Metadata
	req.Labels = release.Labels(a.RequestID, a.Revision, meta.Name, meta.Version)
	return req
}

// helmOptions are the Helm options of one attempt of act: its log, fence, CPU wait and API gates,
// the record's stored event kept, the caller's identity and the deployer seal.
func (s *Service) helmOptions(act *action, logf func(string, ...any), phase *cpuPhase) []helmexec.Option {
	a := act.Action
	opts := append([]helmexec.Option{helmexec.WithLog(logf), helmexec.WithFence(act.end.fence),
		helmexec.WithWaitGate(phase), helmexec.WithAPIGate(phase),
		helmexec.WithSecretsClient(func(si typedcorev1.SecretInterface) typedcorev1.SecretInterface {
			return release.KeepEvent(si, a.SecretName, act.stored)
		}),
	}, s.HelmOptions...)
	opts = append(opts, s.callerOptions(a)...)
	if a.Action != release.ActionUninstall {
		// Who wrote the record's hooks, for the uninstall that runs its delete hooks (an
		// uninstall writes none of its own: sealing there would vouch for the tenant's).
		opts = append(opts, helmexec.WithDeployerSeal(helmexec.SealFor(s.SealKey, a.Namespace, a.Name, a.Revision, a.BoundSecretUID)))
	}
	return opts
}

// loadChart gets the chart an install or upgrade fetches (nil for the others): the one
// submit validated (digest), with the record's name and version, a copy of Helm's own (Helm
// mutates the chart it runs), and free, which gives back the chart memory the copy holds
// (holdChart) once Helm is done with it.
func (s *Service) loadChart(ctx context.Context, act *action) (_ *chart.Chart, free func(), err error) {
	a := act.Action
	if a.Action == release.ActionUninstall || a.Action == release.ActionRollback || a.ReuseChart {
		return nil, func() {}, nil
	}
	c, err := s.Charts.Get(ctx, a.Chart)
	if err != nil {
		return nil, nil, fmt.Errorf("chart %s: %w", a.Chart, err)
	}
	if a.ChartDigest != "" && c.Digest != a.ChartDigest {
		return nil, nil, fmt.Errorf("chart %s: %w: it is %s, the request was validated against %s", a.Chart, helmexec.ErrChartChanged, c.Digest, a.ChartDigest)
	}
	// Across the wait for chart memory, the archive only: the parsed copy is the cache's, and
	// Fresh copies it only if the cache still holds it once the memory is ours.
	archive, loaded := *c, weak.Make(c.Loaded)
	archive.Loaded, c = nil, &archive
	if free, err = s.holdChart(ctx, act, c.Size()); err != nil {
		return nil, nil, fmt.Errorf("chart %s: %w", a.Chart, err)
	}
	c.Loaded = loaded.Value()
	ch, err := c.Fresh(ctx)
	if err != nil {
		free()
		return nil, nil, err
	}
	got, want := ch.Metadata, act.rec.Chart.Metadata
	if got.Name != want.Name || got.Version != want.Version {
		free()
		return nil, nil, fmt.Errorf("chart %s: %w: it is %s %s, the record was reserved for %s %s",
			a.Chart, helmexec.ErrChartChanged, got.Name, got.Version, want.Name, want.Version)
	}
	return ch, free, nil
}
