package executor

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/internal/testwait"
	chartref "github.com/async-helm/async-helm/pkg/chart/ref"
	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/fairqueue"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/progress"
)

// cpuMeter counts the actions in their CPU-bound phase (inside Helm, outside its waits)
// and keeps the most seen at once.
type cpuMeter struct {
	now, max atomic.Int32
}

func (m *cpuMeter) in() {
	n := m.now.Add(1)
	for {
		old := m.max.Load()
		if n <= old || m.max.CompareAndSwap(old, n) {
			return
		}
	}
}

func (m *cpuMeter) out() { m.now.Add(-1) }

// Fifty installs waiting for readiness hold their action slots, not the CPU slots: a 51st
// runs its CPU phase at once, and no more than CPUSlots actions are ever in that phase.
func TestWaitingActionsFreeTheirCPUSlot(t *testing.T) {
	// In a bubble, synctest.Wait says when every action is blocked: rendering, or waiting
	// for a CPU slot.
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 64)
		e.svc.cpu = fairqueue.New(2, fairqueue.Options{}) // CPUSlots 2
		var meter cpuMeter
		var rendering, waiting atomic.Int32
		rendered, ready := make(chan struct{}), make(chan struct{})
		e.helm.run = func(ctx context.Context, req helmexec.Request) (*helmrelease.Release, error) {
			meter.in()
			if req.Name == "late" { // renders and applies, no wait
				meter.out()
				return e.writes(ctx, req)
			}
			rendering.Add(1)
			<-rendered // render and apply
			meter.out()
			gate := e.helm.gate(req.Name)
			gate.Waiting() // Helm's kube client, before its wait for readiness
			waiting.Add(1)
			<-ready
			gate.Working()
			meter.in() // Helm's final write
			defer meter.out()
			return e.writes(ctx, req)
		}
		const n = 50
		var wg sync.WaitGroup
		outcomes := make([]Outcome, n)
		for i := 0; i < n; i++ {
			a := e.reserve(fmt.Sprintf("w%d", i), fmt.Sprintf("req-%d", i))
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				outcomes[i], _ = e.svc.Handle(ctx(t), context.Background(), a, nil)
			}(i)
		}
		synctest.Wait() // every action renders or waits for a CPU slot
		if got := rendering.Load(); got != 2 {
			t.Errorf("%d actions rendering at once with 2 CPU slots", got)
		}
		close(rendered)
		testwait.For(t, func() bool { return waiting.Load() == n })
		// Every earlier action waits for readiness: the late one is not held behind them.
		if o, err := e.svc.Handle(ctx(t), context.Background(), e.reserve("late", "req-late"), nil); err != nil || o != OutcomeDeployed {
			t.Fatalf("an install behind %d waiting ones: %s, %v", n, o, err)
		}
		close(ready)
		wg.Wait()
		for i, o := range outcomes {
			if o != OutcomeDeployed {
				t.Errorf("w%d: %s", i, o)
			}
		}
		if m := meter.max.Load(); m > 2 {
			t.Errorf("%d actions in their CPU phase at once, bound 2", m)
		}
		if e.svc.cpu.InUse() != 0 || !e.svc.Drained() {
			t.Errorf("slots left taken: %d CPU, drained %v", e.svc.cpu.InUse(), e.svc.Drained())
		}
	})
}

// An action's timeout runs from Helm's start: one that waits for a CPU slot longer than its
// timeout (a burst, the executor's own queue) still runs and deploys, and nothing is given
// back that was not taken. The slot is taken, by another tenant's render, once the action
// was admitted (its admission's record reads take the slot too) and is fetching its chart.
// The wait itself is bounded by what the delivery allows (SlotWait here: an hour).
func TestTimeoutStartsWhenHelmStarts(t *testing.T) {
	e := newEnv(t, 4)
	e.svc.cpu = fairqueue.New(1, fairqueue.Options{})
	e.svc.Clock = e.clock
	e.svc.SlotWait = time.Hour
	fetching, fetched := make(chan struct{}), make(chan struct{})
	e.svc.Charts = gatedCharts{charts: charts{packaged(t)}, started: fetching, release: fetched}
	b := e.reserve("b", "r2")
	b.Options.Timeout = 50 * time.Millisecond
	done := make(chan Outcome)
	go func() { o, _ := e.svc.Handle(ctx(t), context.Background(), b, nil); done <- o }()
	<-fetching
	other, err := e.svc.cpu.Acquire(ctx(t), fairqueue.Flow{Namespace: "other", Caller: "carol"})
	if err != nil {
		t.Fatal(err)
	}
	close(fetched)
	testwait.For(t, func() bool { _, cpu := e.svc.Shares(); return queuedIn(cpu, "ns") })
	// On the clock: b's progress ticker and the bound of its wait for the CPU slot. b's
	// deadline is not armed: 4x its timeout ends nothing.
	if n := e.clock.Waiters(); n != 2 {
		t.Errorf("%d timers and tickers while b waits for the slot, want 2", n)
	}
	e.clock.Add(4 * b.Options.Timeout)
	if n := e.clock.Waiters(); n != 2 {
		t.Errorf("%d timers and tickers while b waits for the slot, want 2 (b's deadline armed?)", n)
	}
	other.Release()
	if o := <-done; o != OutcomeDeployed {
		st, desc := e.status("b")
		t.Errorf("an action that waited for a CPU slot past its timeout: %s (%s %q)", o, st, desc)
	}
	if e.helm.calls.Load() != 1 {
		t.Errorf("Helm ran %d times", e.helm.calls.Load())
	}
	if e.svc.cpu.InUse() != 0 {
		t.Errorf("%d CPU slots left taken", e.svc.cpu.InUse())
	}
}

// gatedCharts says when a fetch starts and answers once release is closed.
type gatedCharts struct {
	charts
	started, release chan struct{}
}

func (g gatedCharts) Get(ctx context.Context, ref chartref.Ref) (*chartsource.Chart, error) {
	close(g.started)
	<-g.release
	return g.charts.Get(ctx, ref)
}

// Progress reads the namespace's workloads only while Helm waits for them, and no more
// often than ProgressReads allows for the whole executor: a burst of actions in one
// namespace listed every release's objects per action per tick.
func TestWorkloadReadsOnlyWhileWaiting(t *testing.T) {
	e := newEnv(t, 4)
	s := New(Service{Log: e.svc.Log, ProgressReads: 0.001}, 4) // one read, then none for a long time
	for _, phase := range []string{progress.PhaseFetching, progress.PhaseApplying, ""} {
		if s.readWorkloads(phase) {
			t.Errorf("workloads read in phase %q", phase)
		}
	}
	if !s.readWorkloads(progress.PhaseWaiting) {
		t.Error("no workload read while Helm waits")
	}
	if s.readWorkloads(progress.PhasePostHooks) {
		t.Error("a second read within the executor's bound")
	}
}
