package helmexec

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/async-helm/async-helm/internal/testcharts/hostile"
)

// packed is a chart of one template as an archive.
func packed(t *testing.T, template string) []byte {
	t.Helper()
	ch := &chart.Chart{Metadata: &chart.Metadata{APIVersion: "v2", Name: "hostile", Version: "0.1.0"},
		Templates: []*chart.File{{Name: "templates/cm.yaml", Data: []byte(template)}}}
	return saved(t, ch)
}

func saved(t *testing.T, ch *chart.Chart) []byte {
	t.Helper()
	p, err := chartutil.Save(ch, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A render in a child answers what Render answers in process.
func TestRenderInAChild(t *testing.T) {
	tiny, err := loader.LoadDir(filepath.Join("..", "..", "testdata", "charts", "tiny"))
	if err != nil {
		t.Fatal(err)
	}
	r := &Renderer{}
	out, err := r.Render(context.Background(), ChartRender{Namespace: "team-a", Name: "web", Archive: saved(t, tiny),
		Values: map[string]any{"message": "previewed"}, KubeVersion: "v1.37.2"})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "render-tiny.golden", out)
	_, err = r.Render(context.Background(), ChartRender{Name: "b", Archive: packed(t, "{{ .Values.nope.deeper }}")})
	if !errors.Is(err, ErrRenderFailed) || !strings.Contains(err.Error(), "nil pointer evaluating") {
		t.Errorf("a failing template: %v, want Helm's error as ErrRenderFailed", err)
	}
}

// A template that loops (almost) forever is killed at the bound: the caller gets a clear
// error in time and the child, which burned a core, is gone.
func TestEndlessTemplateIsKilledAtItsDeadline(t *testing.T) {
	var pid int
	r := &Renderer{Limits: RenderLimits{Timeout: time.Second}, started: func(p int) { pid = p }}
	endless := hostile.Endless(t)
	start := time.Now()
	_, err := r.Render(context.Background(), ChartRender{Name: "endless", Archive: endless})
	took := time.Since(start)
	if !errors.Is(err, ErrRenderKilled) || took > 5*time.Second {
		t.Fatalf("endless template: %v after %s, want ErrRenderKilled after about 1s", err, took)
	}
	t.Logf("%v after %s", err, took.Round(time.Millisecond))
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the render child %d still exists after its deadline (kill -0: %v)", pid, err)
	}
}

// A template that builds a huge string ends its child, never the parent.
func TestRenderChildIsBoundedInMemoryAndOutput(t *testing.T) {
	// A minute, not the default 10 s: on a loaded machine (CI runs test binaries side by
	// side on 2 cores) the child took over 10 s to reach 128 MiB, and the time bound won.
	r := &Renderer{Limits: RenderLimits{MaxMemoryBytes: 128 << 20, Timeout: time.Minute}}
	start := time.Now()
	_, err := r.Render(context.Background(), ChartRender{Name: "big", Archive: packed(t, `x: {{ repeat 400000000 "x" }}`)})
	if !errors.Is(err, ErrRenderFailed) || !strings.Contains(err.Error(), "more than 128 MiB of memory") {
		t.Errorf("a 400 MB string: %v, want the memory bound", err)
	}
	t.Logf("%v after %s", err, time.Since(start).Round(time.Millisecond))
	r = &Renderer{Limits: RenderLimits{MaxOutputBytes: 1 << 20, Timeout: time.Minute}}
	start = time.Now()
	_, err = r.Render(context.Background(), ChartRender{Name: "wide", Archive: packed(t, `x: {{ repeat 3000000 "x" }}`)})
	if !errors.Is(err, ErrRenderFailed) || !strings.Contains(err.Error(), "over 1 MiB") {
		t.Errorf("3 MB of manifest: %v, want the output bound", err)
	}
	t.Logf("%v after %s", err, time.Since(start).Round(time.Millisecond))
}

// With every child slot taken, a render waits at most its timeout, then ErrRenderBusy.
func TestRenderWaitsForASlotAtMostItsTimeout(t *testing.T) {
	r := &Renderer{Limits: RenderLimits{Timeout: 2 * time.Second, MaxParallel: 1}}
	r.once.Do(func() { r.slots = make(chan struct{}, 1) })
	r.slots <- struct{}{} // one render runs
	_, err := r.Render(context.Background(), ChartRender{Name: "x", Archive: packed(t, "a: b")})
	if !errors.Is(err, ErrRenderBusy) {
		t.Errorf("no free slot: %v, want ErrRenderBusy", err)
	}
	<-r.slots
	if _, err := r.Render(context.Background(), ChartRender{Name: "x", Archive: packed(t, "a: b")}); err != nil {
		t.Errorf("a free slot: %v", err)
	}
}
