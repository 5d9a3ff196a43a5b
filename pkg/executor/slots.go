package executor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/fairqueue"
)

// cpuPhase is one action's hold on a CPU slot (docs/design.md, "Slots: CPU-bound work and
// waiting"): taken before Helm's render and apply, given back while Helm only waits
// (WaitGate, the action slot lent meanwhile), lent during the apply's API round trips
// (APIGate). Once started, an action takes it again ahead of its tenant's work not yet
// started (fairqueue.Resume): its deadline runs.
type cpuPhase struct {
	cpu  *fairqueue.Queue
	flow fairqueue.Flow
	// action is the action's slot (nil: none to lend).
	action *fairqueue.Seat
	// ctx is the action's: a wait for a slot ends with the action.
	ctx context.Context
	// firstWait bounds the wait for the first slot (0: as long as the action lives), on
	// the clock of after (Service.afterFunc).
	firstWait time.Duration
	after     func(time.Duration, func()) func()

	mu      sync.Mutex
	held    *fairqueue.Seat
	started bool
}

// enter takes a CPU slot, waiting in the action's flow: the first time up to firstWait,
// then, resumed, as long as the action lives.
func (p *cpuPhase) enter() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held != nil {
		return nil
	}
	var seat *fairqueue.Seat
	var err error
	if p.started {
		seat, err = p.cpu.Resume(p.ctx, p.flow)
	} else {
		seat, err = p.first()
	}
	if err != nil {
		return err
	}
	p.held, p.started = seat, true
	return nil
}

// first waits for the first slot, up to firstWait (a slot free now arms no timer).
func (p *cpuPhase) first() (*fairqueue.Seat, error) {
	if p.firstWait <= 0 || p.after == nil {
		return p.cpu.Acquire(p.ctx, p.flow)
	}
	if seat, ok := p.cpu.TryAcquire(p.flow); ok {
		return seat, nil
	}
	ctx, stop := bounded(p.ctx, p.after, p.firstWait,
		fmt.Errorf("%w: none within %s (CPU slots: %d)", ErrNoCPUSlot, p.firstWait, p.cpu.Slots()))
	defer stop()
	seat, err := p.cpu.Acquire(ctx, p.flow)
	if err != nil {
		return nil, context.Cause(ctx)
	}
	return seat, nil
}

// bounded is ctx ended with cause late once d has passed on after's clock (Service.afterFunc).
func bounded(ctx context.Context, after func(time.Duration, func()) func(), d time.Duration, late error) (context.Context, func()) {
	bctx, cancel := context.WithCancelCause(ctx)
	stop := after(d, func() { cancel(late) })
	return bctx, func() { stop(); cancel(nil) }
}

// ErrNoCPUSlot: an action got no CPU slot to start within its bound (queueWait).
var ErrNoCPUSlot = errors.New("no CPU slot to start the action")

// queueWait is the most an action waits in the executor's queues before it starts, and
// before each retry or remediation starts: as long as its delivery may wait for an action
// slot (slotWait), or, where that allows no wait, its own timeout. Its deadline starts once
// it holds a CPU slot.
func (s *Service) queueWait(a events.Action) time.Duration {
	if w := s.slotWait(a); w > 0 {
		return w
	}
	return s.timeout(a)
}

// leave gives the slot back, if held.
func (p *cpuPhase) leave() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held != nil {
		p.held.Release()
		p.held = nil
	}
}

// Waiting is helmexec.WaitGate: Helm waits on the cluster; the CPU slot goes to another
// action, the action slot is lent.
func (p *cpuPhase) Waiting() {
	p.leave()
	if p.action != nil {
		p.action.Lend()
	}
}

// Working is helmexec.WaitGate: the wait returned. An action that ended meanwhile goes on
// without a slot: its fence refuses whatever Helm still tries, and it returns at once.
func (p *cpuPhase) Working() {
	if p.action != nil {
		p.action.Reclaim()
	}
	_ = p.enter()
}

// Calling is helmexec.APIGate: Helm's apply makes its API round trips, which take no CPU
// slot's worth of CPU; the slot is lent (the CPU pool lends to a tenant below its share
// while the holder's is above its own). If it is given, the action finishes without one.
func (p *cpuPhase) Calling() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held != nil {
		p.held.Lend()
	}
}

// Returned is helmexec.APIGate: the call returned; the slot back if still lent.
func (p *cpuPhase) Returned() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held != nil {
		p.held.Reclaim()
	}
}

// runOptions is what run needs beside the action: the deadline, what to call once the
// action holds its first CPU slot (Helm starts), and Helm's log.
type runOptions struct {
	timeout time.Duration
	started func()
	logf    func(string, ...any)
}

// ErrNoChartMemory: an action's chart found no room in the executor's chart memory within
// its bound (queueWait), or is larger than a tenant's share of it.
var ErrNoChartMemory = errors.New("no memory for the action's chart")

// DefaultChartBytes is the executor's chart memory when Service.MaxChartBytes is 0: half of
// its 2 GiB container.
const DefaultChartBytes = 1 << 30

// holdChart holds size bytes of the chart memory for act, waiting up to queueWait with its
// action slot lent, and returns their release: Helm's loaded copy lives as long as the
// action, waits included (56 KiB of archive may unpack to 56 MiB), a tenant a quarter.
func (s *Service) holdChart(ctx context.Context, act *action, size int64) (func(), error) {
	if size <= 0 {
		return func() {}, nil
	}
	wait := s.queueWait(act.Action)
	ctx, stop := bounded(ctx, s.afterFunc, wait, fmt.Errorf("none within %s", wait))
	defer stop()
	lend := func() {}
	if act.seat != nil {
		lend = act.seat.Lend
		defer act.seat.Reclaim()
	}
	free, err := s.chartMem.Hold(ctx, flowOf(act.Action), size, lend)
	if err != nil {
		return nil, fmt.Errorf("%w: its chart holds %w", ErrNoChartMemory, err)
	}
	return free, nil
}
