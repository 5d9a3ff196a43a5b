package helmexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
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

// ChartRender is a dry-run render of a chart archive in a child process.
type ChartRender struct {
	Namespace   string         `json:"namespace"`
	Name        string         `json:"name"`
	Archive     []byte         `json:"archive"`
	Values      map[string]any `json:"values,omitempty"`
	KubeVersion string         `json:"kubeVersion,omitempty"`
	// Budget is what the archive may unpack to (the child checks it again before loading).
	Budget chartsource.Budget `json:"budget"`
	// Revision, when set, renders what an install (1) or an upgrade (Upgrade) to that
	// revision applies (RenderRevision) instead of the template route's dry-run install.
	Revision int  `json:"revision,omitempty"`
	Upgrade  bool `json:"upgrade,omitempty"`
}

// Renderer runs one job each in a new worker (RenderPool's, with RenderLimits' wall-clock
// bound), killed at its deadline: a Go template cannot be stopped from inside (rendering
// never looks at a context, sprig's until and repeat are unbounded), a process can.
type Renderer struct {
	Limits RenderLimits
	// started, when set, is told each child's pid (tests).
	started func(pid int)

	once  sync.Once
	slots chan struct{}
}

// Render renders job in a child and returns the manifests as Render does.
func (r *Renderer) Render(ctx context.Context, job ChartRender) (string, error) {
	res, err := r.child(ctx, workerJob{Archive: &job})
	if err != nil {
		return "", err
	}
	if res.Error != "" {
		return "", fmt.Errorf("%w: %s", ErrRenderFailed, res.Error)
	}
	return res.Manifest, nil
}

// child runs job in a new worker once a slot is free, and returns its answer.
func (r *Renderer) child(ctx context.Context, job workerJob) (workerResult, error) {
	lim := r.Limits.withDefaults()
	r.once.Do(func() { r.slots = make(chan struct{}, lim.MaxParallel) })
	wait := time.NewTimer(lim.Timeout)
	defer wait.Stop()
	select {
	case r.slots <- struct{}{}:
		defer func() { <-r.slots }()
	case <-wait.C:
		return workerResult{}, fmt.Errorf("%w: %d children run, none ended within %s", ErrRenderBusy, lim.MaxParallel, lim.Timeout)
	case <-ctx.Done():
		return workerResult{}, ctx.Err()
	}
	w, err := startWorker(lim, r.started)
	if err != nil {
		return workerResult{}, err
	}
	defer w.kill()
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, lim.Timeout)
	defer cancel()
	if err := writeJob(w.in, job); err != nil {
		return workerResult{}, w.failure(lim, fmt.Errorf("send the job: %w", err))
	}
	answers := make(chan answer, 1)
	go func() { answers <- w.serve(ctx, lim, nil, nil, new(atomic.Bool)) }()
	select {
	case a := <-answers:
		if a.err != nil {
			return workerResult{}, w.failure(lim, a.err)
		}
		return a.res, nil
	case <-ctx.Done():
		if parent.Err() != nil {
			return workerResult{}, fmt.Errorf("render stopped: %w", parent.Err())
		}
		return workerResult{}, fmt.Errorf("%w: it was stopped after %s (a template that loops without end?)", ErrRenderKilled, lim.Timeout)
	}
}

// renderArchive loads the archive under its budget, checks the values against its
// dependencies and renders, as the template route did in process.
func renderArchive(job ChartRender) (string, string) {
	ch, err := job.Budget.Load(job.Archive)
	if err != nil {
		return "", err.Error()
	}
	if err := CheckDependencies(chartsource.Private(ch), job.Values); err != nil {
		return "", err.Error()
	}
	if job.Revision > 0 {
		out, err := RenderRevision(RevisionRender{Namespace: job.Namespace, Name: job.Name, Revision: job.Revision,
			Upgrade: job.Upgrade, Chart: ch, Values: job.Values, KubeVersion: job.KubeVersion})
		if err != nil {
			return "", err.Error()
		}
		return out, ""
	}
	// The parent kills the child at its deadline: the context has nothing to add.
	out, err := Render(context.Background(), RenderRequest{Namespace: job.Namespace, Name: job.Name, Chart: ch,
		Values: job.Values, KubeVersion: job.KubeVersion})
	if err != nil {
		return "", err.Error()
	}
	return out, ""
}

// outOfMemory: a child's stderr says it ran out of memory (its address space bound).
func outOfMemory(stderr string) bool {
	return strings.Contains(stderr, "out of memory") || strings.Contains(stderr, "cannot allocate memory")
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// cappedBuffer keeps the head of a child's stderr, up to max bytes, and drops the rest.
type cappedBuffer struct {
	buf bytes.Buffer
	max int
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if n := b.max - b.buf.Len(); n > 0 {
		b.buf.Write(p[:min(n, len(p))])
	}
	return len(p), nil
}
