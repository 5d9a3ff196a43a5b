package executor

import (
	"context"
	"sync"
	"time"
)

// cpuPhase is one action's hold on a CPU slot (docs/design.md, "Slots: CPU-bound work and
// waiting"). The action takes it before the chart and Helm's render and apply, gives it
// back while Helm only waits (helmexec.WaitGate), and takes it again when the wait
// returns. Waiting actions hold only their action slot, so a burst of installs with `wait`
// is bounded by memory (MaxParallel), and what burns CPU by the cores (CPUSlots).
type cpuPhase struct {
	sem chan struct{}
	// ctx is the action's: a wait for a slot ends with the action.
	ctx context.Context

	mu   sync.Mutex
	held bool
}

// enter takes a CPU slot, waiting for one as long as the action lives.
func (p *cpuPhase) enter() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held {
		return nil
	}
	select {
	case p.sem <- struct{}{}:
		p.held = true
		return nil
	case <-p.ctx.Done():
		return p.ctx.Err()
	}
}

// leave gives the slot back, if held.
func (p *cpuPhase) leave() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held {
		<-p.sem
		p.held = false
	}
}

// Waiting is helmexec.WaitGate: Helm waits on the cluster; the slot goes to another action.
func (p *cpuPhase) Waiting() { p.leave() }

// Working is helmexec.WaitGate: the wait returned. An action that ended meanwhile goes on
// without a slot: its fence refuses whatever Helm still tries, and it returns at once.
func (p *cpuPhase) Working() { _ = p.enter() }

// runOptions is what run needs beside the action: the deadline, what to call once the
// action holds its first CPU slot (Helm starts), and Helm's log.
type runOptions struct {
	timeout time.Duration
	started func()
	logf    func(string, ...any)
}
