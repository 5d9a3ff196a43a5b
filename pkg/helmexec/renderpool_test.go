package helmexec

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
)

// oneTemplate is a chart of one template, rendered as an install of web in ns.
func oneTemplate(template string) GuardRender {
	ch := &chart.Chart{Metadata: &chart.Metadata{APIVersion: "v2", Name: "hostile", Version: "0.1.0"},
		Templates: []*chart.File{{Name: "templates/cm.yaml", Data: []byte(template)}}}
	return GuardRender{Chart: TreeOf(ch), Release: chartutil.ReleaseOptions{Name: "web", Namespace: "ns", Revision: 1, IsInstall: true}}
}

// inProcess is what Helm's engine renders from job in this process.
func inProcess(t *testing.T, job GuardRender) map[string]string {
	t.Helper()
	ch := job.Chart.chart()
	caps := job.Caps
	if caps == nil {
		caps = chartutil.DefaultCapabilities
	}
	vals, err := chartutil.ToRenderValuesWithSchemaValidation(ch, job.Values, job.Release, caps, true)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Engine{}.Render(ch, vals)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// A worker renders what Helm's engine renders in process, and is used again.
func TestRenderPoolRendersAsHelmsEngine(t *testing.T) {
	tiny, err := loader.LoadDir(filepath.Join("..", "..", "testdata", "charts", "tiny"))
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	p := &RenderPool{started: func(pid int) { pids = append(pids, pid) }}
	t.Cleanup(p.Close)
	job := GuardRender{Chart: TreeOf(tiny), Values: map[string]any{"message": "hi"},
		Release: chartutil.ReleaseOptions{Name: "web", Namespace: "ns", Revision: 3, IsUpgrade: true}}
	for range 3 {
		files, _, err := p.Render(context.Background(), PoolRender{Job: job})
		if err != nil {
			t.Fatal(err)
		}
		if want := inProcess(t, job); !reflect.DeepEqual(files, want) {
			t.Fatalf("worker rendered %v, Helm's engine %v", files, want)
		}
	}
	if len(pids) != 1 {
		t.Errorf("%d workers started for 3 renders one after another, want 1", len(pids))
	}
	_, _, err = p.Render(context.Background(), PoolRender{Job: oneTemplate("{{ .Values.nope.deeper }}")})
	if !errors.Is(err, ErrRenderFailed) || !strings.Contains(err.Error(), "nil pointer evaluating") {
		t.Errorf("a failing template: %v, want Helm's error as ErrRenderFailed", err)
	}
}

// peakRSS is this process's peak resident set (VmHWM).
func peakRSS(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status")
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// A template that builds a 400 MiB string fails with the memory reason: the worker dies
// over its bound, this process never holds the string, and the next render gets a new
// worker.
func TestRenderPoolBoundsMemory(t *testing.T) {
	var pids []int
	p := &RenderPool{Limits: RenderLimits{MaxMemoryBytes: 128 << 20}, started: func(pid int) { pids = append(pids, pid) }}
	t.Cleanup(p.Close)
	before := peakRSS(t)
	_, _, err := p.Render(context.Background(), PoolRender{Job: oneTemplate(`n: {{ $s := repeat 209715200 "xx" }}{{ len $s }}`)})
	if !errors.Is(err, ErrRenderMemory) || !strings.Contains(err.Error(), "used more than 128 MiB") {
		t.Fatalf("render of a 400 MiB string: %v, want ErrRenderMemory", err)
	}
	if grew := peakRSS(t) - before; grew > 64<<20 {
		t.Errorf("this process's peak RSS grew by %d MiB", grew>>20)
	}
	files, _, err := p.Render(context.Background(), PoolRender{Job: oneTemplate("ok: {{ .Release.Name }}")})
	if err != nil || files["hostile/templates/cm.yaml"] != "ok: web" || len(pids) != 2 {
		t.Errorf("next render: %v %v with %d workers started, want ok: web from a second worker", files, err, len(pids))
	}
}

// alive reports whether pid is a process (not yet reaped or still running).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && !strings.Contains(string(b), ") Z ")
}

// An endless template is ended at its CPU bound, and the worker running it is killed.
func TestRenderPoolKillsAnEndlessRender(t *testing.T) {
	var pids []int
	p := &RenderPool{started: func(pid int) { pids = append(pids, pid) }}
	t.Cleanup(p.Close)
	_, used, err := p.Render(context.Background(), PoolRender{CPU: 300 * time.Millisecond,
		Job: oneTemplate(`{{ range until 1000000000 }}{{ end }}`)})
	if !errors.Is(err, ErrRenderTimeout) || used < 300*time.Millisecond {
		t.Fatalf("endless render: %v after %s of CPU, want ErrRenderTimeout past 300ms", err, used)
	}
	if len(pids) != 1 || alive(pids[0]) {
		t.Errorf("workers %v: want the one that rendered killed", pids)
	}
}

// An action that ends while its template renders kills the worker: nothing goes on.
func TestRenderPoolKillsTheRenderOfAnEndedAction(t *testing.T) {
	pids := make(chan int, 1)
	p := &RenderPool{started: func(pid int) { pids <- pid }}
	t.Cleanup(p.Close)
	c, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, _, err := p.Render(c, PoolRender{Job: oneTemplate(`{{ range until 1000000000 }}{{ end }}`)})
		done <- err
	}()
	pid := <-pids
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("render of an ended action: %v, want context.Canceled", err)
	}
	if alive(pid) {
		t.Errorf("worker %d still runs", pid)
	}
}
