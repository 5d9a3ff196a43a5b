// Package executor is the executor's use case: run the Helm action of an accepted event
// exactly once per revision, keep a heartbeat while it runs, and never leave the revision
// pending (see docs/design.md).
package executor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"
	"k8s.io/utils/clock"

	"github.com/async-helm/async-helm/pkg/auth"
	"github.com/async-helm/async-helm/pkg/chart/bounds"
	"github.com/async-helm/async-helm/pkg/chart/yamlsize"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/fairqueue"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/signing"
	"github.com/async-helm/async-helm/pkg/valuesfrom"
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
	// OutcomeQueued: a copy of a delivery that waits in this process for a slot is
	// acknowledged; the one that waits is answered when it runs (or asks for a redelivery).
	OutcomeQueued Outcome = "queued"
)

// AnnotationAction on a revision's Lease is the action its executor runs (install,
// upgrade, rollback, uninstall), written before Helm starts.
const AnnotationAction = "async-helm.io/action"

// Service runs actions.
type Service struct {
	Store     Store
	Helm      Helm
	Charts    Charts
	Heartbeat Leases
	Log       *zap.SugaredLogger
	// MaxActionTime caps an action's deadline below the function's request timeout.
	MaxActionTime time.Duration
	// SlotWait is the most a delivery waits for an action slot before ErrBusy (429).
	SlotWait time.Duration
	// DeliveryTimeout is how long a delivery's sender waits for its answer (0: unknown):
	// the action must end within it (slotWait).
	DeliveryTimeout time.Duration
	// MaxWaitingBytes bounds what the deliveries waiting for an action slot hold (waitCost
	// each; 0: unbounded): past it the newest of the tenant waiting the most gets ErrBusy
	// (docs/design.md, "Tenants and shares").
	MaxWaitingBytes int64
	// MaxWaiting bounds the deliveries waiting for an action slot at once (0: no count),
	// each holding at least 1/MaxWaiting of the room: past the pod's containerConcurrency
	// open requests the platform queues them first come, first served.
	MaxWaiting int
	// MaxChartBytes bounds what actions hold of their loaded charts, a tenant a quarter of it
	// (holdChart; 0: DefaultChartBytes).
	MaxChartBytes int64
	// CPUSlots bounds the actions in their CPU-bound phase (chart, render, apply) at once
	// (0: GOMAXPROCS); New's parallel bounds them in all phases.
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
	SealKey signing.Key
	// RenderTimeout bounds the CPU time of rendering a chart's templates in its worker (0:
	// the render pool's bound).
	RenderTimeout time.Duration
	// Orphans counts Helm's goroutines that outlived their action (New makes one).
	Orphans *helmexec.Orphans
	// RequireBinding refuses deliveries without a binding to their Secret (events.BoundSecret):
	// set wherever events are signed (docs/design.md, "Consumed requests").
	RequireBinding bool
	// ActionLogs, when set, keeps each action's Helm log (actionlog.go).
	ActionLogs *ActionLogs
	// ValuesAs reads an action's values_from as its caller (ValuesReaderAs); nil: an action
	// with values_from fails.
	ValuesAs func(events.Caller) (valuesfrom.Reader, error)

	slots         *fairqueue.Queue
	cpu           *fairqueue.Queue
	progressReads *rate.Limiter
	running       *running
	chartMem      *fairqueue.Bytes
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
	// joined counts the copies waiting for this run (guarded by running.mu).
	joined int
	// queued: the run waits for its action slot (guarded by running.mu).
	queued bool
}

// New builds a service that holds at most parallel actions at once, of which at most
// s.CPUSlots in their CPU-bound phase.
func New(s Service, parallel int) *Service {
	s.slots = fairqueue.New(parallel, fairqueue.Options{Lending: true, Clock: s.Clock, MaxWaiting: s.MaxWaitingBytes})
	cpu := s.CPUSlots
	if cpu <= 0 {
		cpu = runtime.GOMAXPROCS(0)
	}
	// Lending: the apply's API round trips lend their CPU slot (cpuPhase.Calling).
	s.cpu = fairqueue.New(cpu, fairqueue.Options{Lending: true, Clock: s.Clock})
	reads := s.ProgressReads
	if reads <= 0 {
		reads = 8
	}
	s.progressReads = rate.NewLimiter(rate.Limit(reads), 1)
	s.running = &running{m: map[string]*run{}}
	s.chartMem = fairqueue.NewBytes(cmp.Or(s.MaxChartBytes, DefaultChartBytes))
	if s.Orphans == nil {
		s.Orphans = &helmexec.Orphans{}
	}
	return &s
}

// Drained reports whether no action lives (with a slot or having lent it).
func (s *Service) Drained() bool { return s.slots.InUse() == 0 }

// Shares are what each flow has of the action slots and of the CPU slots now: queued, the
// oldest wait, held (docs/design.md, "Tenants and shares").
func (s *Service) Shares() (actions, cpu []fairqueue.FlowStats) {
	return s.slots.Stats(), s.cpu.Stats()
}

// flowOf is what an action is accounted to: its namespace and the caller who asked, the
// ServiceAccounts of one namespace being one caller, as admission counts them (auth.Share).
func flowOf(a events.Action) fairqueue.Flow {
	return fairqueue.Flow{Namespace: a.Namespace, Caller: auth.ShareName(a.Caller.User)}
}

// Handle runs the action of one accepted event. shutdown ends in-flight actions (recorded
// as failed); the request context may end without stopping the action. stored is the event
// as received, kept in the revision's secret while it is pending. A redelivery of a
// revision this process is handling waits for that run's outcome (join).
func (s *Service) Handle(reqCtx, shutdown context.Context, a events.Action, stored []byte) (Outcome, error) {
	if s.RequireBinding && a.BoundSecretUID == "" {
		// A copy of a stored event (a tenant can read it) posted to the executor: only
		// deliveries bound by submit or by the sweeper run. Refused before it can be
		// joined by the genuine delivery; the record, maybe the genuine one, is left alone.
		s.Log.Warnw("event refused: it is not bound to a release record (a copied stored event?)",
			"namespace", a.Namespace, "secret", a.SecretName, "requestId", a.RequestID)
		return OutcomeRefused, nil
	}
	key := runKey(a)
	r := &run{done: make(chan struct{}), queued: true}
	if outcome, joined, err := s.join(reqCtx, key, r); joined {
		return outcome, err
	}
	defer func() {
		s.running.mu.Lock()
		delete(s.running.m, key)
		s.running.mu.Unlock()
		close(r.done)
	}()
	seat, err := s.takeSlot(reqCtx, a, stored)
	if err != nil {
		r.err = err
		return "", err
	}
	defer seat.Release()
	s.running.mu.Lock()
	r.queued = false
	s.running.mu.Unlock()
	r.outcome, r.err = s.handle(reqCtx, shutdown, a, stored, seat)
	return r.outcome, r.err
}

// join registers r as key's run in this process, or answers the delivery from the run
// already there (joined): a copy of one still waiting for its slot is acknowledged at once
// (OutcomeQueued: the waiting delivery is the one its sender redelivers if it fails);
// otherwise one copy (the redelivery whose sender lost the first answer) waits for that
// run's outcome, and tries itself if the run failed for its own reasons (its sender hung
// up, no slot). Any further copy is answered ErrHeldElsewhere at once: an open request is
// held by the pod's door and memory, and copies are counted nowhere else.
func (s *Service) join(reqCtx context.Context, key string, r *run) (Outcome, bool, error) {
	for {
		s.running.mu.Lock()
		cur, ok := s.running.m[key]
		if !ok {
			s.running.m[key] = r
			s.running.mu.Unlock()
			return "", false, nil
		}
		if cur.queued {
			s.running.mu.Unlock()
			return OutcomeQueued, true, nil
		}
		if cur.joined >= maxWaitingCopies {
			s.running.mu.Unlock()
			return "", true, fmt.Errorf("%w: %s (a copy already waits for its run on this pod)", ErrHeldElsewhere, key)
		}
		cur.joined++
		s.running.mu.Unlock()
		outcome, again, err := s.await(reqCtx, key, cur)
		if !again {
			return outcome, true, err
		}
	}
}

// maxWaitingCopies is how many copies of a running delivery wait for its outcome.
const maxWaitingCopies = 1

// await waits for cur's outcome as one of its copies; again: the run failed for its own
// reasons, and this copy tries itself.
func (s *Service) await(reqCtx context.Context, key string, cur *run) (Outcome, bool, error) {
	defer func() {
		s.running.mu.Lock()
		cur.joined--
		s.running.mu.Unlock()
	}()
	select {
	case <-cur.done:
		if cur.err != nil {
			return "", true, nil
		}
		// It ran (or found nothing to do): this delivery is a duplicate.
		if cur.outcome == OutcomeDeployed || cur.outcome == OutcomeFailed || cur.outcome == OutcomeUninstalled {
			return OutcomeDuplicate, false, nil
		}
		return cur.outcome, false, nil
	case <-reqCtx.Done():
		return "", false, fmt.Errorf("%w: %s (this pod)", ErrHeldElsewhere, key)
	}
}

// runKey is what deliveries share a handling by: the same request bound to the same Secret.
// Another one on the Secret (a replayed event) must not hand its refusal to the genuine
// delivery; it waits for the revision's Lease instead.
func runKey(a events.Action) string {
	return a.Namespace + "/" + a.SecretName + "/" + a.RequestID + "/" + string(a.BoundSecretUID)
}

// deliverySlack is what a delivery keeps of its time beyond the action's own deadline:
// the outcome's writes and the answer.
const deliverySlack = time.Minute

// waitOverhead is what a waiting delivery holds beside its event: its goroutine, its
// connection and the decoded action.
const waitOverhead = 32 << 10

// waitCost is what a delivery of event holds while it waits: the event as received, its
// stored copy and its decoded values (their bytes, and bounds.ParsedNodeBytes for each of
// their JSON values: `{"a":0}` is 7 bytes and a map of ~300), and waitOverhead.
func waitCost(event []byte) int64 {
	return 3*int64(len(event)) + bounds.ParsedNodeBytes*yamlsize.JSONNodes(event, math.MaxInt64) + waitOverhead
}

// waitCostOf is waitCost, and at least one MaxWaiting-th of the room.
func (s *Service) waitCostOf(event []byte) int64 {
	c := waitCost(event)
	if s.MaxWaiting > 0 && s.MaxWaitingBytes > 0 {
		c = max(c, s.MaxWaitingBytes/int64(s.MaxWaiting))
	}
	return c
}

// slotWait is how long a delivery of a may wait for an action slot: SlotWait, and no longer
// than its sender waits less the action's deadline and deliverySlack (none: no wait).
func (s *Service) slotWait(a events.Action) time.Duration {
	wait := s.SlotWait
	if s.DeliveryTimeout > 0 {
		wait = min(wait, s.DeliveryTimeout-s.timeout(a)-deliverySlack)
	}
	return max(wait, 0)
}

// takeSlot waits in the action's flow for an action slot, up to slotWait (none: a slot
// free now, or none), holding waitCost of the waiting room.
func (s *Service) takeSlot(ctx context.Context, a events.Action, event []byte) (*fairqueue.Seat, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if wait := s.slotWait(a); wait > 0 {
		defer s.afterFunc(wait, cancel)()
	} else {
		cancel()
	}
	seat, err := s.slots.AcquireCost(wctx, flowOf(a), s.waitCostOf(event))
	switch {
	case errors.Is(err, fairqueue.ErrFull):
		return nil, fmt.Errorf("%w: %d actions running and the waiting room is full, its tenant waiting the most there", ErrBusy, s.slots.Slots())
	case err != nil:
		return nil, fmt.Errorf("%w: %d actions running", ErrBusy, s.slots.Slots())
	}
	return seat, nil
}
