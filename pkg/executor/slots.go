package executor

import (
	"context"
	"sync"
	"time"

	"github.com/async-helm/async-helm/pkg/fairqueue"
)

// cpuPhase is one action's hold on a CPU slot (docs/design.md, "Slots: CPU-bound work and
// waiting"). The action takes it before the chart and Helm's render and apply, gives it
// back while Helm only waits (helmexec.WaitGate), and takes it again when the wait
// returns. Waiting actions hold only their action slot, so a burst of installs with `wait`
// is bounded by memory (MaxParallel), and what burns CPU by the cores (CPUSlots). Both
// pools are fair queues (docs/design.md, "Tenants and shares"): while Helm waits the action
// slot is lent, and taken back when the wait returns.
type cpuPhase struct {
	cpu  *fairqueue.Queue
	flow fairqueue.Flow
	// action is the action's slot (nil: none to lend).
	action *fairqueue.Seat
	// ctx is the action's: a wait for a slot ends with the action.
	ctx context.Context

	mu   sync.Mutex
	held *fairqueue.Seat
}

// enter takes a CPU slot, waiting in the action's flow as long as the action lives.
func (p *cpuPhase) enter() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held != nil {
		return nil
	}
	seat, err := p.cpu.Acquire(p.ctx, p.flow)
	if err != nil {
		return err
	}
	p.held = seat
	return nil
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

// runOptions is what run needs beside the action: the deadline, what to call once the
// action holds its first CPU slot (Helm starts), and Helm's log.
type runOptions struct {
	timeout time.Duration
	started func()
	logf    func(string, ...any)
}
