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
	"strings"
	"sync"
	"time"
)

// ErrRenderMemory is a render whose templates used more memory than its worker may have.
var ErrRenderMemory = errors.New("the chart's templates used too much memory")

// RenderPool renders tenants' charts in persistent worker processes (the binary re-run with
// RenderWorkerArg), one chart at a time each: a template is hostile code that Go cannot
// stop or bound in place, a process can be bounded by the kernel and killed. A worker is
// replaced when it is killed (over its CPU bound, its action ended) or its heap stays over
// half its memory bound; starting one costs far more than a tiny chart's render, so
// workers are kept.
type RenderPool struct {
	// Binary is the workers' executable; default this process's own.
	Binary string
	// Limits: Timeout is a render's CPU bound when the caller gives none, MaxMemoryBytes each
	// worker.s address space, MaxOutputBytes a render's answer, MaxParallel the workers.
	Limits RenderLimits
	// started, when set, is told each worker's pid (tests).
	started func(pid int)

	once  sync.Once
	slots chan struct{}
	mu    sync.Mutex
	idle  []*renderWorker
}

// PoolRender is one render asked of a pool.
type PoolRender struct {
	Job GuardRender
	// CPU bounds the worker's CPU time for this render (0: the pool's Timeout).
	CPU time.Duration
	// Lookup answers the templates' `lookup` calls (nil: they find nothing).
	Lookup *LookupServer
	// after is the timer (tests).
	after func(time.Duration) <-chan time.Time
}

// Render renders r in a worker and returns the files as Helm's engine returns them, with
// the worker CPU time the render used.
func (p *RenderPool) Render(ctx context.Context, r PoolRender) (map[string]string, time.Duration, error) {
	lim := p.Limits.withDefaults()
	p.once.Do(func() { p.slots = make(chan struct{}, lim.MaxParallel) })
	select {
	case p.slots <- struct{}{}:
		defer func() { <-p.slots }()
	case <-ctx.Done():
		return nil, 0, fmt.Errorf("wait for a render worker: %w", ctx.Err())
	}
	w, err := p.take(lim)
	if err != nil {
		return nil, 0, err
	}
	res, used, err := w.render(ctx, lim, r)
	if err != nil || res.HeapBytes > uint64(lim.MaxMemoryBytes/2) {
		w.kill()
	} else {
		p.put(w)
	}
	if err != nil {
		return nil, used, err
	}
	switch res.Failed {
	case "":
		return res.Files, used, nil
	case workerFailedTooLarge:
		return nil, used, fmt.Errorf("%w: %w: %s", ErrRenderFailed, ErrManifestsTooLarge, res.Error)
	}
	return nil, used, fmt.Errorf("%w: %s", ErrRenderFailed, res.Error)
}

// take is an idle worker, or a new one.
func (p *RenderPool) take(lim RenderLimits) (*renderWorker, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return w, nil
	}
	p.mu.Unlock()
	return startWorker(p.Binary, lim, p.started)
}

func (p *RenderPool) put(w *renderWorker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.idle = append(p.idle, w)
}

// Close stops the idle workers (a worker rendering stops when its render returns).
func (p *RenderPool) Close() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, w := range idle {
		w.kill()
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

func startWorker(bin string, lim RenderLimits, started func(int)) (*renderWorker, error) {
	if bin == "" {
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("render worker: %w", err)
		}
		bin = self
	}
	cmd := exec.Command(bin, RenderWorkerArg, strconv.FormatInt(lim.MaxMemoryBytes, 10))
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

// render hands r to the worker and waits for its answer, its CPU bound, or ctx.
func (w *renderWorker) render(ctx context.Context, lim RenderLimits, r PoolRender) (workerResult, time.Duration, error) {
	job := workerJob{Render: r.Job}
	if r.Lookup != nil {
		job.Lookup = r.Lookup.Socket()
	}
	base, metered := processCPU(w.cmd.Process.Pid)
	if err := writeFrame(w.in, job); err != nil {
		return workerResult{}, 0, w.failure(lim, fmt.Errorf("send the render: %w", err))
	}
	answers := make(chan answer, 1)
	go func() {
		var a answer
		a.err = readFrame(w.out, lim.MaxOutputBytes, &a.res)
		answers <- a
	}()
	bound := r.CPU
	if bound <= 0 {
		bound = lim.Timeout
	}
	after := r.after
	if after == nil {
		after = time.After
	}
	used := func() time.Duration {
		if !metered {
			return 0
		}
		now, _ := processCPU(w.cmd.Process.Pid)
		return now - base
	}
	wall := time.NewTimer(renderWall(bound))
	defer wall.Stop()
	wait := after(bound)
	for {
		select {
		case <-wall.C:
			return workerResult{}, used(), fmt.Errorf("%w: rendering took more than %s, its lookups' waits included", ErrRenderTimeout, renderWall(bound))
		case a := <-answers:
			if a.err != nil {
				return workerResult{}, used(), w.failure(lim, a.err)
			}
			return a.res, used(), nil
		case <-ctx.Done():
			return workerResult{}, used(), fmt.Errorf("render stopped: %w", ctx.Err())
		case <-wait:
			spent := used()
			if metered && spent < bound {
				wait = after(max(bound-spent, minRenderCheck))
				continue
			}
			return workerResult{}, spent, fmt.Errorf("%w: rendering took more than %s of CPU", ErrRenderTimeout, bound)
		}
	}
}

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
	if strings.Contains(msg, "out of memory") || strings.Contains(msg, "cannot allocate memory") {
		return fmt.Errorf("%w: %w: the chart's templates used more than %d MiB", ErrRenderFailed, ErrRenderMemory, lim.MaxMemoryBytes>>20)
	}
	return fmt.Errorf("%w: the render worker failed: %v: %s", ErrRenderFailed, err, firstLine(msg))
}
