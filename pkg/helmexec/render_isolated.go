package helmexec

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Errors of a render in a child; all but ErrRenderBusy are the chart's (422 at the edge).
var (
	// ErrRenderKilled is a render that did not end within its time and was killed.
	ErrRenderKilled = errors.New("the chart did not render in time")
	// ErrRenderBusy is a render that found no free child slot in time (429 at the edge).
	ErrRenderBusy = errors.New("too many renders at once")
	// ErrRenderFailed is a render that ended with an error of the chart or its values, or
	// over its memory or output bound.
	ErrRenderFailed = errors.New("the chart cannot be rendered")
	// errChildMemory is a child that ended over its memory bound.
	errChildMemory = errors.New("out of memory")
)

// RenderLimits bound renders in child processes. Zero fields take DefaultRenderLimits'.
type RenderLimits struct {
	// Timeout bounds one render; the child is killed when it passes. Waiting for a free
	// slot is bounded by it too.
	Timeout time.Duration
	// MaxMemoryBytes bounds the growth of the child's address space.
	MaxMemoryBytes int64
	// MaxOutputBytes bounds what the child answers (the manifests).
	MaxOutputBytes int64
	// MaxParallel bounds the children running at once.
	MaxParallel int
}

// DefaultRenderLimits are generous for real charts (helm template of large charts takes
// well under a second and a few MiB).
var DefaultRenderLimits = RenderLimits{Timeout: 10 * time.Second, MaxMemoryBytes: 256 << 20,
	MaxOutputBytes: 16 << 20, MaxParallel: 2}

func (l RenderLimits) withDefaults() RenderLimits {
	d := DefaultRenderLimits
	if l.Timeout <= 0 {
		l.Timeout = d.Timeout
	}
	if l.MaxMemoryBytes <= 0 {
		l.MaxMemoryBytes = d.MaxMemoryBytes
	}
	if l.MaxOutputBytes <= 0 {
		l.MaxOutputBytes = d.MaxOutputBytes
	}
	if l.MaxParallel <= 0 {
		l.MaxParallel = d.MaxParallel
	}
	return l
}

// Renderer renders charts in child processes of one binary, killed at their deadline: a
// Go template cannot be stopped from inside (rendering never looks at a context, sprig's
// until and repeat are unbounded), a process can.
type Renderer struct {
	// Binary is the child's executable, run with RenderChildArg; its main must call
	// RunRenderChild when IsRenderChild(os.Args). Default: this process's own.
	Binary string
	Limits RenderLimits
	// started, when set, is told each child's pid (tests).
	started func(pid int)

	once  sync.Once
	slots chan struct{}
}

// Render renders job in a child and returns the manifests as Render does.
func (r *Renderer) Render(ctx context.Context, job ChartRender) (string, error) {
	res, err := r.child(ctx, childJob{Render: &job})
	if err != nil {
		return "", err
	}
	if res.Error != "" {
		return "", fmt.Errorf("%w: %s", ErrRenderFailed, res.Error)
	}
	return res.Manifest, nil
}

// child runs job in a child once a slot is free, and returns its answer.
func (r *Renderer) child(ctx context.Context, job childJob) (renderResult, error) {
	lim := r.Limits.withDefaults()
	r.once.Do(func() { r.slots = make(chan struct{}, lim.MaxParallel) })
	wait := time.NewTimer(lim.Timeout)
	defer wait.Stop()
	select {
	case r.slots <- struct{}{}:
		defer func() { <-r.slots }()
	case <-wait.C:
		return renderResult{}, fmt.Errorf("%w: %d children run, none ended within %s", ErrRenderBusy, lim.MaxParallel, lim.Timeout)
	case <-ctx.Done():
		return renderResult{}, ctx.Err()
	}
	input, err := json.Marshal(job)
	if err != nil {
		return renderResult{}, fmt.Errorf("encode the child's request: %w", err)
	}
	out, err := r.run(ctx, lim, input)
	if err != nil {
		return renderResult{}, err
	}
	var res renderResult
	if err := json.Unmarshal(out, &res); err != nil {
		return renderResult{}, fmt.Errorf("%w: the child answered no result: %v", ErrRenderFailed, err)
	}
	return res, nil
}

// run starts the child, hands it input and reads its answer, killing it at the deadline
// or when its answer grows over the bound.
func (r *Renderer) run(ctx context.Context, lim RenderLimits, input []byte) ([]byte, error) {
	bin, err := orSelf(r.Binary)
	if err != nil {
		return nil, fmt.Errorf("render child: %w", err)
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, lim.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, RenderChildArg, strconv.FormatInt(lim.MaxMemoryBytes, 10))
	// Nothing of the parent's environment (signing key, sink, kubeconfig): one core only.
	cmd.Env = []string{"GOMAXPROCS=1"}
	cmd.Stdin = bytes.NewReader(input)
	stdout := &cappedBuffer{max: lim.MaxOutputBytes, over: cancel}
	stderr := &cappedBuffer{max: 4 << 10}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = time.Second
	childProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("render child: %w", err)
	}
	if r.started != nil {
		r.started(cmd.Process.Pid)
	}
	err = cmd.Wait()
	switch {
	case stdout.exceeded:
		return nil, fmt.Errorf("%w: the manifests are over %d MiB", ErrRenderFailed, lim.MaxOutputBytes>>20)
	case parent.Err() != nil:
		return nil, fmt.Errorf("render stopped: %w", parent.Err())
	case ctx.Err() != nil:
		return nil, fmt.Errorf("%w: it was stopped after %s (a template that loops without end?)", ErrRenderKilled, lim.Timeout)
	case outOfMemory(stderr.buf.String()):
		return nil, fmt.Errorf("%w: %w: it needs more than %d MiB of memory", ErrRenderFailed, errChildMemory, lim.MaxMemoryBytes>>20)
	case err != nil:
		return nil, fmt.Errorf("%w: the render child failed: %v: %s", ErrRenderFailed, err, firstLine(stderr.buf.String()))
	}
	return stdout.buf.Bytes(), nil
}

// orSelf is bin, or this process's own executable when bin is "".
func orSelf(bin string) (string, error) {
	if bin != "" {
		return bin, nil
	}
	return os.Executable()
}

// outOfMemory: a child's stderr says it ran out of memory (its address space bound).
func outOfMemory(stderr string) bool {
	return strings.Contains(stderr, "out of memory") || strings.Contains(stderr, "cannot allocate memory")
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// cappedBuffer keeps up to max bytes; past them it calls over (once) and fails the write.
// It has no ReadFrom: exec's copy must go through Write.
type cappedBuffer struct {
	buf      bytes.Buffer
	max      int64
	over     func()
	exceeded bool
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if int64(b.buf.Len()+len(p)) <= b.max {
		return b.buf.Write(p)
	}
	if !b.exceeded && b.over != nil {
		b.over()
	}
	b.exceeded = true
	if b.over != nil {
		return 0, errors.New("over the bound")
	}
	// stderr: keep the head, drop the rest quietly.
	if n := int(b.max) - b.buf.Len(); n > 0 {
		b.buf.Write(p[:n])
	}
	return len(p), nil
}
