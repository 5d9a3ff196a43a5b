// Package executor is the executor's use case: run the Helm action of an accepted event
// exactly once per revision, keep a heartbeat while it runs, and never leave the revision
// pending (see docs/design.md).
package executor

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"
	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/clock"

	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/progress"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
	"github.com/async-helm/async-helm/pkg/release/lease"
	"github.com/async-helm/async-helm/pkg/wallclock"
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
	// OutcomeRefused: the event does not belong to the record it lands on (a replay onto
	// another Secret, another action or revision): acknowledged, nothing run.
	OutcomeRefused Outcome = "refused"
)

// AnnotationAction on a revision's Lease is the action its executor runs (install,
// upgrade, rollback, uninstall), written before Helm starts.
const AnnotationAction = "async-helm.io/action"

// ErrExhausted means too many renders this process cannot stop are still running: it
// takes no new work and exits once drained, so that its platform restarts it.
var ErrExhausted = errors.New("executor exhausted by orphaned renders; it restarts once drained")

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
	// CPUSlots bounds the actions in their CPU-bound phase (chart, render, apply) at once;
	// an action waiting for readiness holds none (0: GOMAXPROCS). The parallel of New
	// bounds the actions held in all phases.
	CPUSlots int
	// HelmOptions are passed to every Helm action (tests inject faults with them).
	HelmOptions []helmexec.Option
	// MaxHistory is the number of revisions kept per release (Helm's --history-max).
	MaxHistory int
	// Observe, when set, is told every action's outcome and duration (metrics).
	Observe func(action, outcome string, d time.Duration)
	// ProgressInterval is how often the action's progress is recorded (default 2 s).
	ProgressInterval time.Duration
	// ProgressReads bounds the workload reads of all actions' progress, per second
	// (default 8; each is four lists of the namespace).
	ProgressReads float64
	// Clock dates what the executor records, times slot waits and action deadlines, and
	// ticks the progress (nil: the wall clock; tests move a fake one).
	Clock clock.WithTickerAndDelayedExecution
	// Consumed binds each request id to the Secret it was first run on (nil: unchecked).
	Consumed Consumed
	// SealKey is submit's seal key (LabelSeal): a refused event fails the record it lands
	// on only when submit sealed that record for the request (none without a key).
	SealKey []byte
	// RenderTimeout bounds the rendering of a chart's templates (0: unbounded).
	RenderTimeout time.Duration
	// MaxOrphanedRenders is how many renders past their bound may go on before the
	// executor takes no more work (0: no limit).
	MaxOrphanedRenders int
	// Orphans counts Helm's goroutines that outlived their action (New makes one).
	Orphans *helmexec.Orphans
	// RequireBinding refuses deliveries without a binding to their Secret (events.BoundSecret):
	// set wherever events are signed (docs/design.md, "Consumed requests").
	RequireBinding bool
	// ActionLogs, when set, keeps each action's Helm log (actionlog.go).
	ActionLogs *ActionLogs

	slots         chan struct{}
	cpu           chan struct{}
	progressReads *rate.Limiter
	running       *running
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

// New builds a service that holds at most parallel actions at once, of which at most
// s.CPUSlots in their CPU-bound phase.
func New(s Service, parallel int) *Service {
	s.slots = make(chan struct{}, parallel)
	cpu := s.CPUSlots
	if cpu <= 0 {
		cpu = runtime.GOMAXPROCS(0)
	}
	s.cpu = make(chan struct{}, cpu)
	reads := s.ProgressReads
	if reads <= 0 {
		reads = 8
	}
	s.progressReads = rate.NewLimiter(rate.Limit(reads), 1)
	s.running = &running{m: map[string]*run{}}
	if s.Orphans == nil {
		s.Orphans = &helmexec.Orphans{}
	}
	return &s
}

// Exhausted reports whether orphaned renders reached MaxOrphanedRenders: no new work.
func (s *Service) Exhausted() bool {
	if s.MaxOrphanedRenders <= 0 {
		return false
	}
	_, renders := s.Orphans.Count()
	return renders >= s.MaxOrphanedRenders
}

// Drained reports whether no action holds a slot.
func (s *Service) Drained() bool { return len(s.slots) == 0 }

// Handle runs the action of one accepted event. shutdown ends in-flight actions (they are
// recorded as failed); the request context may end without stopping the action. stored is
// the event as received (JSON): it is kept in the revision's secret while it is pending.
//
// A redelivery of a revision this process is already handling waits for that run's
// outcome instead of starting Helm a second time.
func (s *Service) Handle(reqCtx, shutdown context.Context, a events.Action, stored []byte) (Outcome, error) {
	if s.Exhausted() {
		return "", ErrExhausted
	}
	if s.RequireBinding && a.BoundSecretUID == "" {
		// A copy of a stored event (a tenant can read it) posted to the executor: only
		// deliveries bound by submit or by the sweeper run. Refused before it can be
		// joined by the genuine delivery; the record, maybe the genuine one, is left alone.
		s.Log.Warnw("event refused: it is not bound to a release record (a copied stored event?)",
			"namespace", a.Namespace, "secret", a.SecretName, "requestId", a.RequestID)
		return OutcomeRefused, nil
	}
	key := runKey(a)
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

// runKey is what deliveries share a handling by: the same request bound to the same Secret.
// Another one on the Secret (a replayed event) must not hand its refusal to the genuine
// delivery; it waits for the revision's Lease instead.
func runKey(a events.Action) string {
	return a.Namespace + "/" + a.SecretName + "/" + a.RequestID + "/" + string(a.BoundSecretUID)
}

// takeSlot takes a free slot at once, or waits up to SlotWait for one.
func (s *Service) takeSlot(ctx context.Context) error {
	select {
	case s.slots <- struct{}{}:
		return nil
	default:
	}
	if s.SlotWait > 0 {
		t := wallclock.Or(s.Clock).NewTimer(s.SlotWait)
		defer t.Stop()
		select {
		case s.slots <- struct{}{}:
			return nil
		case <-t.C():
		case <-ctx.Done():
		}
	}
	return fmt.Errorf("%w: %d actions running", ErrBusy, cap(s.slots))
}

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
	// started: the consumed request records that an executor started Helm for it.
	started bool
}

// handle runs the steps: check (no lease yet), hold the lease, admit (under the lease:
// the record against the event, the consumed request, a cancel already asked), run, record.
func (s *Service) handle(reqCtx, shutdown context.Context, a events.Action, stored []byte) (Outcome, error) {
	act := &action{Action: a, stored: stored,
		log: s.Log.With("namespace", a.Namespace, "release", a.Name, "revision", a.Revision, "requestId", a.RequestID)}
	if outcome, done, err := s.check(reqCtx, act); done {
		return outcome, err
	}
	held, err := s.Heartbeat.Hold(reqCtx, a.Namespace, release.LeaseName(a.Name, a.Revision))
	if err != nil {
		return "", err
	}
	if held == nil {
		act.log.Infow("a live executor holds this revision; asking for redelivery")
		return "", fmt.Errorf("%w: %s/%s", ErrHeldElsewhere, a.Namespace, a.SecretName)
	}
	act.held = held
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

// releaseLease gives the lease back, unless it was lost (another executor owns it now).
func (s *Service) releaseLease(reqCtx context.Context, act *action) {
	if act.end != nil && act.end.lost() {
		return
	}
	// Its own short context: the request's may be over.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(reqCtx), 15*time.Second)
	defer cancel()
	if err := act.held.Release(ctx); err != nil {
		act.log.Warnw("lease not released; it expires by itself", "error", err)
	}
}

// check is the first look, before any lease: a revision gone, final or reserved for another
// request needs nothing.
func (s *Service) check(ctx context.Context, act *action) (Outcome, bool, error) {
	rel, err := s.Store.Get(ctx, act.Namespace, act.Name, act.Revision)
	if errors.Is(err, release.ErrNotFound) {
		act.log.Infow("reservation is gone; nothing to do")
		return OutcomeGone, true, nil
	}
	if err != nil {
		return "", true, err
	}
	if st := rel.Info.Status.String(); !release.IsPending(st) {
		return s.checkFinal(ctx, act, rel)
	}
	if id := rel.Labels[release.LabelRequestID]; id != act.RequestID {
		act.log.Infow("event is for another request of this revision; acknowledged and ignored", "reservedFor", id)
		return OutcomeStale, true, nil
	}
	return "", false, nil
}

// checkFinal acknowledges a delivery for a final revision. The executor's own adoption
// drops the queued label, so a final record that still carries it was never started: a
// namespace editor rewrote its reservation's payload final, which admission would count
// for ever (the sweeper looks only at records labelled pending). Its queued label is
// dropped and the event refused; a genuine redelivery after the end is a duplicate.
func (s *Service) checkFinal(ctx context.Context, act *action, rel *helmrelease.Release) (Outcome, bool, error) {
	st := rel.Info.Status.String()
	if rel.Labels[release.LabelQueued] != "true" {
		act.log.Infow("revision already final; duplicate delivery acknowledged", "status", st)
		return OutcomeDuplicate, true, nil
	}
	dropped, err := s.Store.UnqueueFinal(ctx, act.Namespace, act.Name, act.Revision)
	if err != nil {
		return "", true, err // redelivered: the label is dropped on a later try
	}
	act.log.Warnw("event refused: its never-started reservation was rewritten final; queued label dropped",
		"status", st, "dropped", dropped)
	return OutcomeRefused, true, nil
}

// admit decides, under the lease, whether Helm runs: the record is read again (another
// executor may have finished it meanwhile) and kept for the later steps.
func (s *Service) admit(ctx context.Context, act *action) (Outcome, bool, error) {
	rel, err := s.Store.Get(ctx, act.Namespace, act.Name, act.Revision)
	if errors.Is(err, release.ErrNotFound) {
		return OutcomeGone, true, nil
	}
	if err != nil {
		return "", true, err
	}
	if !release.IsPending(rel.Info.Status.String()) {
		return OutcomeDuplicate, true, nil
	}
	act.rec = rel
	if outcome, done, err := s.consume(ctx, act); done {
		return outcome, done, err
	}
	// An uninstall acts on the latest revision: if an upgrade was reserved in the same
	// instant as the mark, the upgrade wins and the uninstall is failed, never run on it.
	if act.Action.Action == release.ActionUninstall {
		if outcome, done, err := s.checkLatest(ctx, act); done {
			return outcome, done, err
		}
	}
	// A cancel asked while its executor was lost: fail it without running Helm. The outcome
	// is recorded first, in async-helm's namespace: if failing the record fails, the
	// redelivery is refused, never resumed, whatever the tenant makes of the record meanwhile.
	if by := act.held.CancelledBy(); by != "" {
		if r, ok := s.Consumed.(outcomeRecorder); ok {
			if err := r.MarkDone(ctx, act.RequestID, consumed.OutcomeCancelled); err != nil {
				return "", true, err
			}
		}
		if _, err := s.Store.MarkFailed(ctx, act.Namespace, act.Name, act.Revision, failed(act.Name, "cancelled by "+by), release.ReplaceFailed); err != nil {
			return "", true, err
		}
		return OutcomeFailed, true, nil
	}
	if act.Action.Action == release.ActionUninstall {
		if act.grave, err = s.digTombstone(ctx, act); err != nil {
			return "", true, err
		}
	}
	// What runs, on the Lease before Helm starts: submit answers a cancel it cannot honour
	// (an uninstall) with 409.
	if _, err := act.held.Sync(ctx, AnnotationAction, string(act.Action.Action)); err != nil {
		act.log.Warnw("running action not written on the lease", "error", err)
	}
	if err := s.markStarted(ctx, act); err != nil {
		return "", true, err // redelivered; Helm has not run
	}
	return "", false, nil
}

// markStarted records on the consumed request that Helm is about to run (once per request):
// from then on Helm's own writes may drop the queued label, and a resume must not take
// that for a tenant's relabel (resumeOrRefuse).
func (s *Service) markStarted(ctx context.Context, act *action) error {
	if s.Consumed == nil || act.started {
		return nil
	}
	return s.Consumed.MarkStarted(ctx, act.RequestID)
}

// consume checks the event against the record it lands on, then binds its request id to
// this Secret (by UID) in state tenants cannot write: a signed event copied onto another
// Secret (a replay) is refused, a redelivery to the same Secret resumes.
func (s *Service) consume(ctx context.Context, act *action) (Outcome, bool, error) {
	if why := mismatch(act.Action, act.rec); why != "" {
		act.log.Warnw("event refused: it does not match the record it lands on", "why", why)
		return s.refuse(ctx, act, why)
	}
	if s.Consumed == nil {
		return "", false, nil
	}
	meta, err := s.Store.SecretMeta(ctx, act.Namespace, act.SecretName)
	if err != nil {
		return "", true, err
	}
	if meta == nil {
		return OutcomeGone, true, nil
	}
	uid := meta.GetUID()
	if bound := act.BoundSecretUID; bound != "" && bound != uid {
		return s.refuseSwapped(ctx, act, uid)
	}
	bind := consumed.Record{RequestID: act.RequestID, Namespace: act.Namespace, Name: act.Name,
		Action: string(act.Action.Action), Revision: act.Revision, SecretUID: uid, At: wallclock.Or(s.Clock).Now()}
	counts := release.CountsAsQueued(s.SealKey, meta)
	if !counts {
		// The verdict is bound with the request, in the one create: no later delivery
		// resumes it, whatever the labels say by then, even if failing the record fails.
		bind.Outcome = string(OutcomeFailed)
	}
	first, err := s.Consumed.Consume(ctx, bind)
	if errors.Is(err, consumed.ErrConsumedElsewhere) {
		act.log.Warnw("event refused: its request was consumed for another release record (a replay?)",
			"secretUID", uid, "error", err)
		return s.refuse(ctx, act, "its request was consumed for another release record")
	}
	if err != nil {
		return "", true, err
	}
	if !first { // bound by an executor that was lost (resume), or that finished (refuse)
		return s.resumeOrRefuse(ctx, act, meta)
	}
	if !counts {
		return s.failUnqueued(ctx, act, meta.GetLabels(), &bind)
	}
	return "", false, nil
}

// failUnqueued fails, unrun, a reservation that admission stopped counting before any
// executor started it (release.CountsAsQueued): only Helm's adoption drops the queued
// label, after this point. A namespace editor who drops it, or rewrites another label the
// count reads (the owner label, the seal; without a seal key the status or revision
// label), frees a MAX_QUEUED slot; the work must not then run. bound is the request's
// consumed record: without an outcome, "failed" is recorded before the record is failed,
// so that no later delivery resumes it if that write fails; an outcome is kept.
func (s *Service) failUnqueued(ctx context.Context, act *action, labels map[string]string, bound *consumed.Record) (Outcome, bool, error) {
	what := fmt.Sprintf("lost its %s label", release.LabelQueued)
	if labels[release.LabelQueued] == "true" {
		what = "was relabelled out of the queued count (its owner, seal, status or revision label)"
	}
	act.log.Warnw("event refused: its reservation stopped counting as queued before any executor started it", "how", what)
	reason := failed(act.Name, fmt.Sprintf("revision %d %s before an executor started it (admission counts queued revisions by these labels); nothing ran",
		act.Revision, what))
	if r, ok := s.Consumed.(outcomeRecorder); ok && (bound == nil || bound.Outcome == "") {
		if err := r.MarkDone(ctx, act.RequestID, string(OutcomeFailed)); err != nil {
			return "", true, err // redelivered: not resumed while it does not count
		}
	}
	if _, err := s.Store.MarkFailed(ctx, act.Namespace, act.Name, act.Revision, reason, release.ReplaceFailed); err != nil {
		return "", true, err // redelivered: the request has its outcome, the write is retried
	}
	return OutcomeFailed, true, nil
}

// resumeOrRefuse lets a delivery bound to a consumed request resume its action, unless the
// request already ran to its end: a namespace editor who rewrites the finished record in
// place (same UID) back to pending and posts the kept event must not get it run again. A
// request no executor started Helm for (consumed.Record.Started, in state tenants cannot
// write) runs only if its reservation still counts as queued: its executor was lost before
// Helm started, or its failure was not written, and the tenant may have relabelled it since.
func (s *Service) resumeOrRefuse(ctx context.Context, act *action, meta metav1.Object) (Outcome, bool, error) {
	rec, err := s.Consumed.Lookup(ctx, act.RequestID)
	if err != nil {
		return "", true, err
	}
	act.started = rec != nil && rec.Started
	if !act.started && !release.CountsAsQueued(s.SealKey, meta) {
		return s.failUnqueued(ctx, act, meta.GetLabels(), rec)
	}
	if rec != nil && rec.Outcome != "" {
		act.log.Warnw("event refused: its request already ran (a rewound record?)", "outcome", rec.Outcome)
		// Sealed and queued again (its labels put back), it would hold a slot: failed.
		return s.refuse(ctx, act, "its request already ran ("+rec.Outcome+")")
	}
	if steps, ok := s.Consumed.(stepReader); ok {
		// The request went on as a retry or its remediation: this attempt is over, even if
		// its record was rewound to pending and nothing watches its Lease any more.
		st, err := steps.StepsOf(ctx, act.RequestID)
		if err != nil {
			return "", true, err
		}
		if st.Attempt > 1 || st.Remediation != "" {
			act.log.Warnw("event refused: its request went on as a later attempt", "attempt", st.Attempt, "remediation", st.Remediation)
			return OutcomeRefused, true, nil
		}
	}
	if r, ok := s.Consumed.(resumeClaimer); ok {
		if err := r.ClaimResume(ctx, act.RequestID); errors.Is(err, consumed.ErrTooManyResumes) {
			reason := failed(act.Name, fmt.Sprintf("its executor was lost too often (%v); not run again", err))
			if _, err := s.Store.MarkFailed(ctx, act.Namespace, act.Name, act.Revision, reason, release.ReplaceFailed); err != nil {
				return "", true, err
			}
			s.markDone(ctx, act, OutcomeFailed)
			return OutcomeFailed, true, nil
		} else if err != nil {
			return "", true, err
		}
	}
	act.log.Infow("request already bound to this record; resuming")
	return "", false, nil
}

// resumeClaimer counts the resumes of a request (consumed.Store).
type resumeClaimer interface {
	ClaimResume(ctx context.Context, requestID string) error
}

// refuseSwapped refuses a delivery whose Secret is not the one submit accepted it for (a
// tenant made the reservation again under its name): the request is bound to the Secret
// submit named, so no later delivery (the stored copy a sweeper re-sends) runs it on this one.
func (s *Service) refuseSwapped(ctx context.Context, act *action, uid types.UID) (Outcome, bool, error) {
	bound := act.BoundSecretUID
	_, err := s.Consumed.Consume(ctx, consumed.Record{RequestID: act.RequestID, Namespace: act.Namespace,
		Name: act.Name, Action: string(act.Action.Action), Revision: act.Revision, SecretUID: bound, At: wallclock.Or(s.Clock).Now()})
	if err != nil && !errors.Is(err, consumed.ErrConsumedElsewhere) {
		return "", true, err // redelivered: bind and refuse again
	}
	act.log.Warnw("event refused: the Secret is not the one it was accepted for (a swap?)",
		"secretUID", uid, "acceptedFor", bound)
	return s.refuse(ctx, act, "the Secret is not the one its request was accepted for")
}

// refuse acknowledges an event refused on the record it lands on. A record submit sealed
// for this request and still queued counts toward MAX_QUEUED until QUEUE_DEADLINE, and
// every re-send is refused the same way: a tenant who rewrites its own reservations would
// hold the queue for an hour. So such a record is failed now, with the reason. One without
// our seal (or not queued, or not our revision) is not ours to touch: it is left alone.
func (s *Service) refuse(ctx context.Context, act *action, why string) (Outcome, bool, error) {
	secret := &metav1.ObjectMeta{Namespace: act.Namespace, Name: release.SecretName(act.Name, act.Revision), Labels: act.rec.Labels}
	if len(s.SealKey) == 0 || secret.Labels[release.LabelQueued] != "true" ||
		secret.Labels[release.LabelRevision] != strconv.Itoa(act.Revision) || !release.Sealed(s.SealKey, secret) {
		return OutcomeRefused, true, nil
	}
	reason := failed(act.Name, fmt.Sprintf("revision %d was refused by the executor: %s; nothing ran", act.Revision, why))
	if _, err := s.Store.MarkFailed(ctx, act.Namespace, act.Name, act.Revision, reason, release.KeepFailed); err != nil {
		// Redelivered: the next delivery is refused again and retries the write.
		return "", true, fmt.Errorf("fail refused revision %s/%s: %w", act.Namespace, secret.Name, err)
	}
	act.log.Infow("refused revision marked failed; it no longer counts toward admission", "why", why)
	return OutcomeRefused, true, nil
}

// mismatch says why an event does not belong to the record it lands on ("" when it does).
func mismatch(a events.Action, rel *helmrelease.Release) string {
	switch {
	case rel.Name != a.Name || rel.Namespace != a.Namespace || rel.Version != a.Revision:
		return fmt.Sprintf("the record is %s/%s v%d", rel.Namespace, rel.Name, rel.Version)
	case rel.Labels[release.LabelRequestID] != a.RequestID:
		return fmt.Sprintf("the record was reserved for request %q", rel.Labels[release.LabelRequestID])
	case rel.Info.Status.String() != a.Action.PendingStatus():
		return fmt.Sprintf("the record is %s, not %s", rel.Info.Status, a.Action.PendingStatus())
	}
	return ""
}

// failed is the description of a failed action, in Helm's words.
func failed(name, why string) string { return fmt.Sprintf("Release %q failed: %s", name, why) }

// endKind is why an action ended for the executor before Helm returned.
type endKind int

const (
	notEnded endKind = iota
	endTimeout
	endCancel
	endLost
	endShutdown
)

// ending is how an action ends for the executor; the first end wins. It closes the
// action's fence before it cancels the action's context, so that nothing Helm writes after
// the end lands (its own failure write included): the executor's final write says why.
type ending struct {
	fence  *helmexec.Fence
	cancel context.CancelFunc
	mu     sync.Mutex
	kind   endKind
	detail string
}

func (e *ending) end(kind endKind, detail string) {
	e.mu.Lock()
	if e.kind != notEnded {
		e.mu.Unlock()
		return
	}
	e.kind, e.detail = kind, detail
	e.mu.Unlock()
	e.fence.End()
	e.cancel()
}

func (e *ending) get() (endKind, string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.kind, e.detail
}

func (e *ending) lost() bool { k, _ := e.get(); return k == endLost }

// timeout is the action's deadline: the request's, capped by MaxActionTime.
func (s *Service) timeout(a events.Action) time.Duration {
	timeout := a.Options.Timeout
	if s.MaxActionTime > 0 && (timeout <= 0 || timeout > s.MaxActionTime) {
		timeout = s.MaxActionTime
	}
	return timeout
}

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
	logs := helmexec.NewLogBuffer(200)
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
	logs  *helmexec.LogBuffer
}

// afterFunc calls f after d on the service's clock, on a goroutine of its own as
// time.AfterFunc does (a fake clock calls it under its lock); the answer stops it.
func (s *Service) afterFunc(d time.Duration, f func()) func() {
	t := wallclock.Or(s.Clock).AfterFunc(d, func() { go f() })
	return func() { t.Stop() }
}

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
		s.recordFailure(ctx, act, res.err, res.logs)
		return OutcomeFailed
	case kind != notEnded:
		// Helm returned as the action ended: its last write may have been refused (Helm
		// ignores a failed final write). Still pending means it was.
		if s.recordFailure(ctx, act, errors.New("the action ended as Helm finished"), res.logs) {
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

// outcomeRecorder is the part of the consumed records (consumed.Store) that takes an
// action's outcome.
type outcomeRecorder interface {
	MarkDone(ctx context.Context, requestID, outcome string) error
}

// stepReader reads how far a request's retries went (consumed.Store).
type stepReader interface {
	StepsOf(ctx context.Context, requestID string) (consumed.Steps, error)
}

// markDone records on the request's consumed record that its action ran to its end, so no
// later delivery resumes it (resumeOrRefuse). An uninstall's success is recorded before its
// tombstone (finishUninstall); an action abandoned to another executor is that one's.
func (s *Service) markDone(reqCtx context.Context, act *action, outcome Outcome) {
	rec, ok := s.Consumed.(outcomeRecorder)
	if !ok || outcome == OutcomeUninstalled || (act.end != nil && act.end.lost()) {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(reqCtx), 15*time.Second)
	defer cancel()
	if err := rec.MarkDone(ctx, act.RequestID, string(outcome)); err != nil {
		act.log.Warnw("outcome not recorded on the consumed request", "error", err)
	}
}

// finishUninstall records that Helm's uninstall succeeded: first on the request's consumed
// record, in async-helm's namespace, which is what the notifier takes "uninstalled" from (a
// tombstone Lease is the tenant's to write); then on the tombstone, which makes the notifier
// look now. Without the first the tombstone is left unfinished: finished, the notifier would
// take it for a forgery.
func (s *Service) finishUninstall(ctx context.Context, act *action) {
	if rec, ok := s.Consumed.(outcomeRecorder); ok {
		if err := rec.MarkDone(ctx, act.RequestID, consumed.OutcomeUninstalled); err != nil {
			act.log.Errorw("uninstall outcome not recorded; no \"uninstalled\" event will be sent", "error", err)
			return
		}
	}
	if err := s.Store.FinishTombstone(ctx, act.grave); err != nil {
		act.log.Warnw("tombstone not finished; the notifier reports it once the lease is gone", "error", err)
	}
}

// recordFailure marks the revision failed with the reason, and reports whether it did (a
// revision already final is left alone).
func (s *Service) recordFailure(ctx context.Context, act *action, runErr error, logs *helmexec.LogBuffer) bool {
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
	marked, err := s.Store.MarkFailed(ctx, act.Namespace, act.Name, act.Revision, reason, ifFailed)
	if err != nil {
		act.log.Errorw("could not record the failure; the notifier's sweeper will", "error", err)
	}
	if act.Action.Action == release.ActionUninstall {
		if err := s.Store.BuryTombstone(ctx, act.grave); err != nil {
			act.log.Warnw("tombstone of the failed uninstall left; the notifier removes it", "error", err)
		}
	}
	act.log.Warnw("action failed", "error", runErr, "helmLog", logs.Tail())
	return marked || err != nil
}

// watch records the action's progress on its Lease every ProgressInterval and notices a
// cancel request there (one API call per tick: a write when the progress changed, else a read).
func (s *Service) watch(ctx context.Context, held Lease, phases *progress.Phases, a events.Action, start time.Time,
	lost func(string), cancelled func(by string) (stop bool)) {
	every := s.ProgressInterval
	if every <= 0 {
		every = 2 * time.Second
	}
	var collector *progress.Collector
	if client, err := s.Helm.Client(s.callerOptions(a)...); err == nil {
		collector = &progress.Collector{Client: client, Namespace: a.Namespace, Release: a.Name, Since: start}
	}
	// A retry's progress says which attempt it is (remediate.go).
	last := progress.Progress{Attempt: a.Attempt}
	seen := false // a cancel request already answered
	t := wallclock.Or(s.Clock).NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		p := last
		p.Phase, p.Hook = phases.Current()
		if collector != nil && s.readWorkloads(p.Phase) {
			_ = collector.Workloads(ctx, &p) // a failed read keeps the last counts
		}
		if !p.Same(last) || last.Updated.IsZero() {
			p.Updated = wallclock.Or(s.Clock).Now()
			last = p
		}
		reason, err := held.Sync(ctx, lease.AnnotationProgress, last.Encode())
		switch {
		case err != nil:
			continue // transient; the heartbeat decides whether the lease is lost
		case reason != "":
			lost(reason)
			return
		}
		if by := held.CancelledBy(); by != "" && !seen {
			if cancelled(by) {
				return
			}
			seen = true
		}
	}
}

// readWorkloads says whether a progress tick reads the namespace's workloads (four lists of
// the whole namespace): only while Helm waits for them (readiness, hooks), and no more than
// ProgressReads times a second for the whole executor. Every running action did it every
// tick: in a burst of installs into one namespace that was a list of every release's
// objects per action every 2 s, on the API server submit answers from.
func (s *Service) readWorkloads(phase string) bool {
	switch phase {
	case progress.PhaseWaiting, progress.PhasePreHooks, progress.PhasePostHooks:
	default:
		return false
	}
	return s.progressReads == nil || s.progressReads.Allow()
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
func (s *Service) digTombstone(ctx context.Context, act *action) (lease.Tombstone, error) {
	rel := act.rec
	chartLabel := rel.Labels[release.LabelChart]
	if chartLabel == "" && rel.Chart != nil && rel.Chart.Metadata != nil { // a release plain helm installed
		chartLabel = release.ChartLabel(rel.Chart.Metadata.Name, rel.Chart.Metadata.Version)
	}
	return s.Store.DigTombstone(ctx, lease.Tombstone{Namespace: act.Namespace, Name: act.Name,
		Revision: act.Revision, RequestID: act.RequestID, Chart: chartLabel})
}

// checkLatest fails an uninstall whose revision is no longer the release's latest; done
// is true when the handling ends here.
func (s *Service) checkLatest(ctx context.Context, act *action) (Outcome, bool, error) {
	revs, err := s.Store.LiveHistory(ctx, act.Namespace, act.Name)
	if err == nil && (len(revs) == 0 || revs[0].Version == act.Revision) {
		return "", false, nil
	}
	if err != nil {
		return "", true, err
	}
	reason := fmt.Sprintf("Uninstall of %q failed: revision %d (%s) was reserved after revision %d was marked; nothing was deleted",
		act.Name, revs[0].Version, revs[0].Status, act.Revision)
	if _, err := s.Store.MarkFailed(ctx, act.Namespace, act.Name, act.Revision, reason, release.ReplaceFailed); err != nil {
		return "", true, err
	}
	return OutcomeFailed, true, nil
}

// run maps the action onto Helm, behind the action's fence, holding a CPU slot except
// while Helm waits.
func (s *Service) run(ctx context.Context, act *action, o runOptions) (*helmrelease.Release, error) {
	// The chart is downloaded before a CPU slot is taken: a download waits on a server the
	// caller chose (bounded by the chart source: time, size, and its own load slots), and
	// a stalling one must not hold one of the few CPU slots every tenant needs.
	fetched, err := s.downloadChart(ctx, act.Action)
	if err != nil {
		return nil, err
	}
	phase := &cpuPhase{sem: s.cpu, ctx: ctx}
	if err := phase.enter(); err != nil {
		return nil, fmt.Errorf("waiting for a CPU slot: %w", err)
	}
	defer phase.leave()
	if o.started != nil {
		o.started()
	}
	timeout, logf := o.timeout, o.logf
	a := act.Action
	req := helmexec.Request{
		Namespace: a.Namespace, Name: a.Name, Revision: a.Revision, Values: a.Values,
		Timeout: timeout, Wait: a.Options.Wait, WaitForJobs: a.Options.WaitForJobs,
		Atomic: a.Options.Atomic, Description: a.Options.Description,
		MaxHistory: s.MaxHistory, ChartDigest: a.ChartDigest, RollbackTo: a.RollbackTo,
		RenderTimeout: s.RenderTimeout, Replace: act.attempt > 1, // a retry installs over the failed attempt
	}
	opts := append([]helmexec.Option{helmexec.WithLog(logf), helmexec.WithFence(act.end.fence), helmexec.WithWaitGate(phase),
		helmexec.WithSecretsClient(func(si typedcorev1.SecretInterface) typedcorev1.SecretInterface {
			return release.KeepEvent(si, a.SecretName, act.stored)
		}),
	}, s.HelmOptions...)
	opts = append(opts, s.callerOptions(a)...)
	// The record's chart label stays, unless a chart is fetched (its own then): a rollback
	// runs the target's chart, a reused chart the deployed one.
	meta := act.rec.Chart.Metadata
	req.Labels = release.Labels(a.RequestID, a.Revision, meta.Name, meta.Version)
	switch {
	case a.Action == release.ActionUninstall:
		return s.Helm.Uninstall(ctx, req, opts...)
	case a.Action == release.ActionRollback:
		return s.Helm.Rollback(ctx, req, opts...)
	case !a.ReuseChart:
		if err := s.prepareChart(ctx, act, fetched, &req); err != nil {
			return nil, err
		}
	}
	if a.Action == release.ActionUpgrade {
		return s.Helm.Upgrade(ctx, req, opts...)
	}
	return s.Helm.Install(ctx, req, opts...)
}

// downloadChart gets the chart an install or upgrade fetches (nil for the others).
func (s *Service) downloadChart(ctx context.Context, a events.Action) (*chartsource.Chart, error) {
	if a.Action == release.ActionUninstall || a.Action == release.ActionRollback || a.ReuseChart {
		return nil, nil
	}
	c, err := s.Charts.Get(ctx, a.Chart)
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", a.Chart, err)
	}
	return c, nil
}

// prepareChart puts the downloaded chart into req: the one submit validated (digest), with
// the record's name and version, and its dependencies present.
func (s *Service) prepareChart(ctx context.Context, act *action, c *chartsource.Chart, req *helmexec.Request) error {
	a := act.Action
	var err error
	if a.ChartDigest != "" && c.Digest != a.ChartDigest {
		return fmt.Errorf("chart %s: %w: it is %s, the request was validated against %s", a.Chart, helmexec.ErrChartChanged, c.Digest, a.ChartDigest)
	}
	// Helm mutates the chart it runs: each action gets its own copy.
	if req.Chart, err = c.Fresh(ctx); err != nil {
		return err
	}
	got, want := req.Chart.Metadata, act.rec.Chart.Metadata
	if got.Name != want.Name || got.Version != want.Version {
		return fmt.Errorf("chart %s: %w: it is %s %s, the record was reserved for %s %s",
			a.Chart, helmexec.ErrChartChanged, got.Name, got.Version, want.Name, want.Version)
	}
	req.Labels = release.Labels(a.RequestID, a.Revision, got.Name, got.Version)
	check, err := c.Fresh(ctx)
	if err != nil {
		return err
	}
	return helmexec.CheckDependencies(check, a.Values)
}
