package helmexec

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/async-helm/async-helm/pkg/fairqueue"
)

// ErrRenderMemory is a render whose templates used more memory than its worker may have.
var ErrRenderMemory = errors.New("the chart's templates used too much memory")

// RenderPool renders tenants' charts in worker processes, one chart at a time each: Go
// cannot stop or bound a template in place, the kernel can bound and kill a process. A
// worker serves one tenant, kept idle for its next render; seats are handed out per
// tenant (docs/design.md, "Render workers", "A worker serves one tenant").
type RenderPool struct {
	// Limits: Timeout is a render's CPU bound when the caller gives none, MaxMemoryBytes each
	// worker's address space, MaxOutputBytes a render's answer, MaxParallel the workers.
	Limits RenderLimits
	// started, when set, is told each worker's pid (tests).
	started func(pid int)

	once  sync.Once
	seats *fairqueue.Queue
	mu    sync.Mutex
	idle  []idleWorker // least recently used first
}

// idleWorker is a worker waiting for its tenant's next render.
type idleWorker struct {
	flow fairqueue.Flow
	w    *renderWorker
}

// PoolRender is one render asked of a pool.
type PoolRender struct {
	Job GuardRender
	// Engine is the Helm whose engine renders Job ("": v3).
	Engine Engine
	// Flow is the tenant the render's worker is accounted to.
	Flow fairqueue.Flow
	// CPU bounds the worker's CPU time for this render (0: the pool's Timeout).
	CPU time.Duration
	// Lookup answers the templates' `lookup` calls (nil: they find nothing).
	Lookup *Lookups
	// Schemas: the worker checks the values against the chart's schemas before it renders,
	// under the render's bounds.
	Schemas bool
	// after is the timer (tests).
	after func(time.Duration) <-chan time.Time
}

// workerSeats is the pool's fair queue of workers.
func (p *RenderPool) workerSeats(lim RenderLimits) *fairqueue.Queue {
	p.once.Do(func() { p.seats = fairqueue.New(lim.MaxParallel, fairqueue.Options{Lending: true}) })
	return p.seats
}

// Render renders r in a worker and returns the files as Helm's engine returns them, with
// the worker CPU time the render used.
func (p *RenderPool) Render(ctx context.Context, r PoolRender) (map[string]string, time.Duration, error) {
	lim := p.Limits.withDefaults()
	seat, err := p.workerSeats(lim).Acquire(ctx, r.Flow)
	if err != nil {
		return nil, 0, fmt.Errorf("wait for a render worker: %w", err)
	}
	defer seat.Release()
	if ctx.Err() != nil { // granted as the action ended
		return nil, 0, fmt.Errorf("wait for a render worker: %w", ctx.Err())
	}
	w, err := p.take(lim, r.Flow)
	if err != nil {
		return nil, 0, err
	}
	res, used, err := w.render(ctx, lim, r, seat)
	if err != nil || res.HeapBytes > uint64(lim.MaxMemoryBytes/2) {
		w.kill()
	} else {
		p.put(w, lim, r.Flow)
	}
	if err != nil {
		return nil, used, err
	}
	switch res.Failed {
	case "":
		return res.Files, used, nil
	case workerFailedTooLarge:
		return nil, used, fmt.Errorf("%w: %w: %s", ErrRenderFailed, ErrManifestsTooLarge, res.Error)
	case workerFailedValues:
		return nil, used, fmt.Errorf("%w:\n%s", ErrValuesInvalid, res.Error)
	case workerFailedCoalesce:
		return nil, used, fmt.Errorf("coalesce values: %s", res.Error)
	}
	return nil, used, fmt.Errorf("%w: %s", ErrRenderFailed, res.Error)
}

// take is flow's idle worker, or a new one: never another tenant's.
func (p *RenderPool) take(lim RenderLimits, flow fairqueue.Flow) (*renderWorker, error) {
	p.mu.Lock()
	for i := len(p.idle) - 1; i >= 0; i-- {
		if p.idle[i].flow == flow {
			w := p.idle[i].w
			p.idle = append(p.idle[:i], p.idle[i+1:]...)
			p.mu.Unlock()
			return w, nil
		}
	}
	p.mu.Unlock()
	return startWorker(lim, p.started)
}

// put keeps w for flow's next render; past MaxParallel idle workers the least recently
// used one stops.
func (p *RenderPool) put(w *renderWorker, lim RenderLimits, flow fairqueue.Flow) {
	p.mu.Lock()
	p.idle = append(p.idle, idleWorker{flow: flow, w: w})
	var stop *renderWorker
	if len(p.idle) > lim.MaxParallel {
		stop = p.idle[0].w
		p.idle = p.idle[1:]
	}
	p.mu.Unlock()
	if stop != nil {
		stop.kill()
	}
}

// Close stops the idle workers (a worker rendering stops when its render returns).
func (p *RenderPool) Close() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, i := range idle {
		i.w.kill()
	}
}

// renderWorker is one worker process and its pipes.
type renderWorker struct {
	cmd    *exec.Cmd
	in     *bufio.Writer
	stdin  io.Closer
	out    *bufio.Reader
	stderr *cappedBuffer // guarded by exited
	exited chan struct{}
	waitMu sync.Mutex
}

// startWorker starts this process's own executable as a worker.
func startWorker(lim RenderLimits, started func(int)) (*renderWorker, error) {
	bin, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("render worker: %w", err)
	}
	cmd := exec.Command(bin, RenderChildArg, strconv.FormatInt(lim.MaxMemoryBytes, 10))
	// Nothing of the parent's environment (signing key, sink, kubeconfig): one core only.
	cmd.Env = []string{"GOMAXPROCS=1"}
	childProcAttr(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("render worker: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("render worker: %w", err)
	}
	w := &renderWorker{cmd: cmd, in: bufio.NewWriter(stdin), stdin: stdin, out: bufio.NewReader(stdout),
		stderr: &cappedBuffer{max: 4 << 10}, exited: make(chan struct{})}
	cmd.Stderr = w.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("render worker: %w", err)
	}
	if started != nil {
		started(cmd.Process.Pid)
	}
	go func() {
		_ = cmd.Wait()
		close(w.exited)
	}()
	return w, nil
}

// kill ends the worker and waits for it.
func (w *renderWorker) kill() {
	_ = w.cmd.Process.Kill()
	_ = w.stdin.Close()
	<-w.exited
}

// answer is a worker's result or why there is none.
type answer struct {
	res workerResult
	err error
}

// lender is a render's seat in the pool: lent while the render waits on a lookup.
type lender interface {
	Lend()
	Reclaim()
}

// render hands r to the worker and waits for its answer, its CPU bound, or ctx. A worker
// that fails before its values are checked fails the check: the schema is the likelier cost.
func (w *renderWorker) render(ctx context.Context, lim RenderLimits, r PoolRender, seat lender) (workerResult, time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	m := newCPUMeter(w.cmd.Process.Pid)
	if err := writeJob(w.in, workerJob{Render: r.Job, Engine: r.Engine, Lookups: r.Lookup != nil, Schemas: r.Schemas}); err != nil {
		return workerResult{}, 0, w.failure(lim, fmt.Errorf("send the render: %w", err))
	}
	var checked atomic.Bool
	answers := make(chan answer, 1)
	go func() { answers <- w.serve(ctx, lim, r.Lookup, seat, &checked) }()
	res, err := w.await(ctx, lim, r, answers, m)
	if err != nil && r.Schemas && !checked.Load() {
		err = fmt.Errorf("%w: %w", ErrValuesUnchecked, err)
	}
	return res, m.used(), err
}

// cpuMeter reads a worker's CPU time since a job started.
type cpuMeter struct {
	pid     int
	base    time.Duration
	metered bool
}

func newCPUMeter(pid int) cpuMeter {
	base, metered := processCPU(pid)
	return cpuMeter{pid: pid, base: base, metered: metered}
}

// used is the CPU time so far (0 where it cannot be read).
func (m cpuMeter) used() time.Duration {
	if !m.metered {
		return 0
	}
	now, _ := processCPU(m.pid)
	return now - m.base
}

// await waits for the worker's answer within the render's CPU and wall bounds (wall time
// alone where CPU time cannot be read).
func (w *renderWorker) await(ctx context.Context, lim RenderLimits, r PoolRender, answers <-chan answer, m cpuMeter) (workerResult, error) {
	bound := r.CPU
	if bound <= 0 {
		bound = lim.Timeout
	}
	after := r.after
	if after == nil {
		after = time.After
	}
	wall := time.NewTimer(renderWall(bound))
	defer wall.Stop()
	wait := after(bound)
	for {
		select {
		case <-wall.C:
			return workerResult{}, fmt.Errorf("%w: rendering took more than %s, its lookups' waits included", ErrRenderTimeout, renderWall(bound))
		case a := <-answers:
			if a.err != nil {
				return workerResult{}, w.failure(lim, a.err)
			}
			return a.res, nil
		case <-ctx.Done():
			return workerResult{}, fmt.Errorf("render stopped: %w", ctx.Err())
		case <-wait:
			if spent := m.used(); m.metered && spent < bound {
				wait = after(max(bound-spent, minRenderCheck))
				continue
			}
			return workerResult{}, fmt.Errorf("%w: rendering took more than %s of CPU", ErrRenderTimeout, bound)
		}
	}
}

// serve reads what the worker writes until the job's result: each lookup it asks is
// answered through this job's lookups, the seat lent while the API server answers.
func (w *renderWorker) serve(ctx context.Context, lim RenderLimits, lookups *Lookups, seat lender, checked *atomic.Bool) answer {
	for {
		m, err := readMsg(w.out, lim.MaxOutputBytes)
		if err != nil {
			return answer{err: err}
		}
		switch {
		case m.Result != nil:
			return answer{res: *m.Result}
		case m.Checked:
			checked.Store(true)
			continue
		case m.Lookup == nil || lookups == nil:
			return answer{err: errors.New("the worker asked a lookup its job has not")}
		}
		seat.Lend()
		a := lookups.answer(ctx, *m.Lookup)
		seat.Reclaim()
		if err := writeFrame(w.in, a); err != nil {
			return answer{err: fmt.Errorf("answer a lookup: %w", err)}
		}
	}
}

// minRenderCheck keeps the last checks before the CPU bound from waking for a few ns each.
const minRenderCheck = 10 * time.Millisecond

// renderWall bounds a worker render in time, whatever its CPU: a render waiting on its
// lookups uses no CPU, and would otherwise hold a worker of the shared pool for as long as
// the API server takes to answer its thousands of lookups.
func renderWall(cpu time.Duration) time.Duration {
	return max(3*cpu, 30*time.Second)
}

// failure is why a worker gave no answer: killed over its memory, an answer over its
// bound, or it died.
func (w *renderWorker) failure(lim RenderLimits, err error) error {
	if errors.Is(err, errFrameTooLarge) {
		return fmt.Errorf("%w: the manifests are over %d MiB", ErrRenderFailed, lim.MaxOutputBytes>>20)
	}
	_ = w.cmd.Process.Kill()
	<-w.exited
	msg := w.stderr.buf.String()
	if outOfMemory(msg) {
		return fmt.Errorf("%w: %w: the chart's templates used more than %d MiB of memory", ErrRenderFailed, ErrRenderMemory, lim.MaxMemoryBytes>>20)
	}
	return fmt.Errorf("%w: the render worker failed: %v: %s", ErrRenderFailed, err, firstLine(msg))
}
