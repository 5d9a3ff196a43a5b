// Package executor is the executor's use case: run the Helm action of an accepted event
// exactly once per revision, keep a heartbeat while it runs, and never leave the revision
// pending (see docs/design.md).
package executor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/progress"
	"github.com/async-helm/async-helm/pkg/release"
)

// ErrBusy means every slot runs an action; the event should be redelivered later.
var ErrBusy = errors.New("executor at capacity")

// ErrHeldElsewhere means another executor's live lease covers the revision. The event is
// redelivered later: if that executor died, its lease expires and the redelivery takes
// over; if it lives, the redelivery finds the revision final and is acknowledged.
var ErrHeldElsewhere = errors.New("another executor is running this revision")

// Outcome says what handling an event did.
type Outcome string

// Outcomes.
const (
	OutcomeDeployed Outcome = "deployed"
	// OutcomeUninstalled: Helm uninstalled the release; its records are gone.
	OutcomeUninstalled Outcome = "uninstalled"
	OutcomeFailed      Outcome = "failed"
	OutcomeDuplicate   Outcome = "duplicate" // revision already final: nothing to do
	OutcomeGone        Outcome = "gone"      // the reservation was taken back
	OutcomeStale       Outcome = "stale"     // the event is for an older request of a reused revision
)

// Service runs actions.
type Service struct {
	Store     Store
	Helm      Helm
	Charts    Charts
	Heartbeat Leases
	Log       *zap.SugaredLogger
	// MaxActionTime caps an action's deadline below the function's request timeout.
	MaxActionTime time.Duration
	// SlotWait is how long a delivery waits for a free slot before 429.
	SlotWait time.Duration
	// HelmOptions are passed to every Helm action (tests inject faults with them).
	HelmOptions []helmexec.Option
	// MaxHistory is the number of revisions kept per release (Helm's --history-max).
	MaxHistory int
	// Observe, when set, is told every action's outcome and duration (metrics).
	Observe func(action, outcome string, d time.Duration)
	// ProgressInterval is how often the action's progress is recorded (default 2 s).
	ProgressInterval time.Duration
	Now              func() time.Time

	slots   chan struct{}
	running *running
}

// running is the set of revisions this process is handling.
type running struct {
	mu sync.Mutex
	m  map[string]*run
}

// run is one revision's handling in this process; redeliveries wait for it.
type run struct {
	done    chan struct{}
	outcome Outcome
	err     error
	// joined counts the redeliveries waiting for this run (guarded by running.mu).
	joined int
}

// New builds a service that runs at most parallel actions at once.
func New(s Service, parallel int) *Service {
	s.slots = make(chan struct{}, parallel)
	s.running = &running{m: map[string]*run{}}
	return &s
}

// Handle runs the action of one accepted event. shutdown ends in-flight actions (they are
// recorded as failed); the request context may end without stopping the action. stored is
// the event as received (JSON): it is kept in the revision's secret while it is pending.
//
// A redelivery of a revision this process is already handling waits for that run's
// outcome instead of starting Helm a second time.
func (s *Service) Handle(reqCtx, shutdown context.Context, a events.Action, stored []byte) (Outcome, error) {
	key := a.Namespace + "/" + a.SecretName
	r := &run{done: make(chan struct{})}
	for {
		s.running.mu.Lock()
		cur, ok := s.running.m[key]
		if !ok {
			s.running.m[key] = r
			s.running.mu.Unlock()
			break
		}
		cur.joined++
		s.running.mu.Unlock()
		select {
		case <-cur.done:
			if cur.err == nil { // it ran (or found nothing to do): this delivery is a duplicate
				if cur.outcome == OutcomeDeployed || cur.outcome == OutcomeFailed || cur.outcome == OutcomeUninstalled {
					return OutcomeDuplicate, nil
				}
				return cur.outcome, nil
			}
			// It failed for its own reasons (its sender hung up, no slot): try ourselves.
		case <-reqCtx.Done():
			return "", fmt.Errorf("%w: %s (this pod)", ErrHeldElsewhere, key)
		}
	}
	defer func() {
		s.running.mu.Lock()
		delete(s.running.m, key)
		s.running.mu.Unlock()
		close(r.done)
	}()
	if err := s.takeSlot(reqCtx); err != nil {
		r.err = err
		return "", err
	}
	defer func() { <-s.slots }()
	r.outcome, r.err = s.handle(reqCtx, shutdown, a, stored)
	return r.outcome, r.err
}

// takeSlot takes a free slot at once, or waits up to SlotWait for one.
func (s *Service) takeSlot(ctx context.Context) error {
	select {
	case s.slots <- struct{}{}:
		return nil
	default:
	}
	if s.SlotWait > 0 {
		t := time.NewTimer(s.SlotWait)
		defer t.Stop()
		select {
		case s.slots <- struct{}{}:
			return nil
		case <-t.C:
		case <-ctx.Done():
		}
	}
	return fmt.Errorf("%w: %d actions running", ErrBusy, cap(s.slots))
}

func (s *Service) handle(reqCtx, shutdown context.Context, a events.Action, stored []byte) (Outcome, error) {
	log := s.Log.With("namespace", a.Namespace, "release", a.Name, "revision", a.Revision, "requestId", a.RequestID)
	rel, err := s.Store.Get(reqCtx, a.Namespace, a.Name, a.Revision)
	if errors.Is(err, release.ErrNotFound) {
		log.Infow("reservation is gone; nothing to do")
		return OutcomeGone, nil
	}
	if err != nil {
		return "", err
	}
	if st := rel.Info.Status.String(); !release.IsPending(st) {
		log.Infow("revision already final; duplicate delivery acknowledged", "status", st)
		return OutcomeDuplicate, nil
	}
	if id := rel.Labels[release.LabelRequestID]; id != a.RequestID {
		log.Infow("event is for another request of this revision; acknowledged and ignored", "reservedFor", id)
		return OutcomeStale, nil
	}
	held, err := s.Heartbeat.Hold(reqCtx, a.Namespace, release.LeaseName(a.Name, a.Revision))
	if err != nil {
		return "", err
	}
	if held == nil {
		log.Infow("a live executor holds this revision; asking for redelivery")
		return "", fmt.Errorf("%w: %s/%s", ErrHeldElsewhere, a.Namespace, a.SecretName)
	}
	// Between the first look and the lease, another executor may have finished it.
	if rel, err = s.Store.Get(reqCtx, a.Namespace, a.Name, a.Revision); err != nil || !release.IsPending(rel.Info.Status.String()) {
		_ = held.Release(context.WithoutCancel(reqCtx))
		if err != nil {
			return "", err
		}
		return OutcomeDuplicate, nil
	}
	var grave release.Tombstone
	// An uninstall acts on the latest revision: if an upgrade was reserved in the same
	// instant as the mark, the upgrade wins and the uninstall is failed, never run on it.
	if a.Action == release.ActionUninstall {
		if outcome, done, err := s.checkLatest(reqCtx, a, held); done {
			return outcome, err
		}
	}
	// A cancel asked while its executor was lost: fail it without running Helm.
	if by := held.CancelledBy(); by != "" {
		reason := fmt.Sprintf("Release %q failed: cancelled by %s", a.Name, by)
		if _, err := s.Store.MarkFailed(reqCtx, a.Namespace, a.Name, a.Revision, reason, true); err != nil {
			return "", err
		}
		_ = held.Release(context.WithoutCancel(reqCtx))
		return OutcomeFailed, nil
	}

	if a.Action == release.ActionUninstall {
		if grave, err = s.digTombstone(reqCtx, a, rel); err != nil {
			_ = held.Release(context.WithoutCancel(reqCtx))
			return "", err
		}
	}

	// The action outlives the delivery's context (a broker timing out must not abort a
	// half-done install) but not the process, nor the loss of its lease.
	timeout := a.Options.Timeout
	if s.MaxActionTime > 0 && (timeout <= 0 || timeout > s.MaxActionTime) {
		timeout = s.MaxActionTime
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(reqCtx), timeout)
	defer cancel()
	stop := context.AfterFunc(shutdown, cancel)
	defer stop()
	var lostReason, cancelledBy atomic.Value
	seal := &release.SealableDriver{}
	hbCtx, hbCancel := context.WithCancel(ctx)
	lose := func(reason string) {
		lostReason.Store(reason)
		log.Warnw("lease lost; cancelling the action", "reason", reason)
		seal.Seal() // before the cancel: Helm writes its own failure when its context ends
		cancel()
	}
	go held.Keep(hbCtx, lose)

	start := time.Now()
	logs := helmexec.NewLogBuffer(200)
	phases := progress.NewPhases(logs.Log)
	go s.watch(hbCtx, held, phases, a, start, lose, func(by string) {
		cancelledBy.Store(by)
		log.Infow("cancel requested; stopping the action", "by", by)
		// Before the cancel: Helm's own failure write then says who cancelled it.
		seal.FailWith(a.Revision, fmt.Sprintf("Release %q failed: cancelled by %s", a.Name, by))
		cancel()
	})
	final, runErr := s.run(ctx, a, timeout, phases.Log, stored, seal)
	hbCancel()

	// Final writes get their own short context: the action's may be cancelled already.
	cleanup, cancelCleanup := context.WithTimeout(context.WithoutCancel(reqCtx), 15*time.Second)
	defer cancelCleanup()
	outcome := OutcomeDeployed
	lost, _ := lostReason.Load().(string)
	by, _ := cancelledBy.Load().(string)
	switch {
	case runErr != nil && lost != "":
		// Another executor owns the revision now: its outcome is the one that counts.
		outcome = OutcomeFailed
		log.Warnw("action abandoned after losing the lease", "reason", lost, "error", runErr)
	case runErr != nil:
		outcome = OutcomeFailed
		reason, overwrite := runErr.Error(), true
		switch {
		case by != "":
			reason = fmt.Sprintf("Release %q failed: cancelled by %s (%v)", a.Name, by, runErr)
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			reason = fmt.Sprintf("Release %q failed: timed out after %s (%v)", a.Name, timeout, runErr)
		case shutdown.Err() != nil:
			reason = fmt.Sprintf("Release %q failed: the executor shut down while the action ran (%v)", a.Name, runErr)
		default:
			overwrite = false // Helm's own description of the failure stands
		}
		if _, err := s.Store.MarkFailed(cleanup, a.Namespace, a.Name, a.Revision, reason, overwrite); err != nil {
			log.Errorw("could not record the failure; the notifier's sweeper will", "error", err)
		}
		if a.Action == release.ActionUninstall && lost == "" {
			if err := s.Store.BuryTombstone(cleanup, grave); err != nil {
				log.Warnw("tombstone of the failed uninstall left; the notifier removes it", "error", err)
			}
		}
		log.Warnw("action failed", "error", runErr, "duration", time.Since(start), "helmLog", logs.Tail())
	case a.Action == release.ActionUninstall:
		outcome = OutcomeUninstalled
		if err := s.Store.FinishTombstone(cleanup, grave); err != nil {
			log.Warnw("tombstone not finished; the notifier reports it once the lease is gone", "error", err)
		}
	case final != nil && final.Info.Status != helmrelease.StatusDeployed:
		outcome = OutcomeFailed
	}
	if lost == "" {
		if err := held.Release(cleanup); err != nil {
			log.Warnw("lease not released; it expires by itself", "error", err)
		}
	}
	log.Infow("action finished", "outcome", outcome, "duration", time.Since(start))
	if s.Observe != nil {
		s.Observe(string(a.Action), string(outcome), time.Since(start))
	}
	return outcome, nil
}

// watch records the action's progress on its Lease every ProgressInterval and notices a
// cancel request there (one API call per tick: a write when the progress changed, else a read).
func (s *Service) watch(ctx context.Context, held Lease, phases *progress.Phases, a events.Action, start time.Time,
	lost func(string), cancelled func(by string)) {
	every := s.ProgressInterval
	if every <= 0 {
		every = 2 * time.Second
	}
	var collector *progress.Collector
	if client, err := s.Helm.Client(s.callerOptions(a)...); err == nil {
		collector = &progress.Collector{Client: client, Namespace: a.Namespace, Release: a.Name, Since: start}
	}
	var last progress.Progress
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p := last
		p.Phase, p.Hook = phases.Current()
		if collector != nil && p.Phase != progress.PhaseFetching {
			_ = collector.Workloads(ctx, &p) // a failed read keeps the last counts
		}
		if !p.Same(last) || last.Updated.IsZero() {
			p.Updated = s.now()
			last = p
		}
		reason, err := held.Sync(ctx, release.AnnotationProgress, last.Encode())
		switch {
		case err != nil:
			continue // transient; the heartbeat decides whether the lease is lost
		case reason != "":
			lost(reason)
			return
		}
		if by := held.CancelledBy(); by != "" {
			cancelled(by)
			return
		}
	}
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// callerOptions make Helm (and the progress reads) act as the user who asked.
func (s *Service) callerOptions(a events.Action) []helmexec.Option {
	if a.Caller.User == "" {
		return nil
	}
	return []helmexec.Option{helmexec.WithImpersonation(a.Caller.User, a.Caller.UID, a.Caller.Groups, a.Caller.Extra)}
}

// digTombstone writes an uninstall's tombstone before Helm deletes the records: it is what
// reports "uninstalled" once they are gone (docs/design.md).
func (s *Service) digTombstone(ctx context.Context, a events.Action, rel *helmrelease.Release) (release.Tombstone, error) {
	chartLabel := rel.Labels[release.LabelChart]
	if chartLabel == "" && rel.Chart != nil && rel.Chart.Metadata != nil { // a release plain helm installed
		chartLabel = release.ChartLabel(rel.Chart.Metadata.Name, rel.Chart.Metadata.Version)
	}
	return s.Store.DigTombstone(ctx, release.Tombstone{Namespace: a.Namespace, Name: a.Name,
		Revision: a.Revision, RequestID: a.RequestID, Chart: chartLabel})
}

// checkLatest fails an uninstall whose revision is no longer the release's latest; done
// is true when the handling ends here.
func (s *Service) checkLatest(ctx context.Context, a events.Action, held Lease) (Outcome, bool, error) {
	revs, err := s.Store.LiveHistory(ctx, a.Namespace, a.Name)
	if err == nil && (len(revs) == 0 || revs[0].Version == a.Revision) {
		return "", false, nil
	}
	defer func() { _ = held.Release(context.WithoutCancel(ctx)) }()
	if err != nil {
		return "", true, err
	}
	reason := fmt.Sprintf("Uninstall of %q failed: revision %d (%s) was reserved after revision %d was marked; nothing was deleted",
		a.Name, revs[0].Version, revs[0].Status, a.Revision)
	if _, err := s.Store.MarkFailed(ctx, a.Namespace, a.Name, a.Revision, reason, true); err != nil {
		return "", true, err
	}
	return OutcomeFailed, true, nil
}

func (s *Service) run(ctx context.Context, a events.Action, timeout time.Duration, logf func(string, ...interface{}), stored []byte, seal *release.SealableDriver) (*helmrelease.Release, error) {
	req := helmexec.Request{
		Namespace: a.Namespace, Name: a.Name, Revision: a.Revision, Values: a.Values,
		Timeout: timeout, Wait: a.Options.Wait, WaitForJobs: a.Options.WaitForJobs,
		Atomic: a.Options.Atomic, Description: a.Options.Description,
		MaxHistory: s.MaxHistory, ChartDigest: a.ChartDigest, RollbackTo: a.RollbackTo,
	}
	opts := append([]helmexec.Option{helmexec.WithLog(logf),
		helmexec.WithSecretsClient(func(si typedcorev1.SecretInterface) typedcorev1.SecretInterface {
			return release.KeepEvent(si, a.SecretName, stored)
		}),
		helmexec.WithStorageWrapper(func(d driver.Driver) driver.Driver { seal.Driver = d; return seal }),
	}, s.HelmOptions...)
	opts = append(opts, s.callerOptions(a)...)
	switch a.Action {
	case release.ActionUninstall:
		return s.Helm.Uninstall(ctx, req, opts...)
	case release.ActionRollback:
		// The chart and values are the target revision's, as Helm takes them; the
		// reservation's chart label (the target's chart) stays.
		rel, err := s.Store.Get(ctx, a.Namespace, a.Name, a.Revision)
		if err != nil {
			return nil, err
		}
		req.Labels = release.Labels(a.RequestID, a.Revision, rel.Chart.Metadata.Name, rel.Chart.Metadata.Version)
		return s.Helm.Rollback(ctx, req, opts...)
	}
	if !a.ReuseChart {
		c, err := s.Charts.Get(ctx, a.Chart)
		if err != nil {
			return nil, fmt.Errorf("chart %s: %w", a.Chart, err)
		}
		if a.ChartDigest != "" && c.Digest != a.ChartDigest {
			return nil, fmt.Errorf("chart %s: %w: it is %s, the request was validated against %s", a.Chart, helmexec.ErrChartChanged, c.Digest, a.ChartDigest)
		}
		// Helm mutates the chart it runs: each action gets its own copy.
		if req.Chart, err = c.Fresh(); err != nil {
			return nil, err
		}
		req.Labels = release.Labels(a.RequestID, a.Revision, req.Chart.Metadata.Name, req.Chart.Metadata.Version)
		check, err := c.Fresh()
		if err != nil {
			return nil, err
		}
		if err := helmexec.CheckDependencies(check, a.Values); err != nil {
			return nil, err
		}
	}
	if req.Labels == nil {
		// Reused chart: keep the chart label of the reservation.
		rel, err := s.Store.Get(ctx, a.Namespace, a.Name, a.Revision)
		if err != nil {
			return nil, err
		}
		req.Labels = release.Labels(a.RequestID, a.Revision, rel.Chart.Metadata.Name, rel.Chart.Metadata.Version)
	}
	if a.Action == release.ActionUpgrade {
		return s.Helm.Upgrade(ctx, req, opts...)
	}
	return s.Helm.Install(ctx, req, opts...)
}
