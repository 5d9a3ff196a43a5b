package helmexec

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
)

// renderFrozen is what Helm's engine renders of the chart frozen from files.
func renderFrozen(t *testing.T, job GuardRender, files map[string]string) map[string]string {
	t.Helper()
	fz, err := newFrozen()
	if err != nil {
		t.Fatal(err)
	}
	fz.freeze(job.Chart.chart(), files, job)
	vals, err := chartutil.ToRenderValues(fz.chart, nil, job.Release, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	out, err := engine.Engine{}.Render(fz.chart, vals)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Helm's render of a frozen chart is the worker's output byte for byte, whatever it holds.
func TestAFrozenChartRendersItsOutput(t *testing.T) {
	job := oneTemplate("x")
	for _, text := range []string{
		"", "a: b\n", "{{ .Values.x }}", "{{{{- /* */ -}}}}", `a: "\" \\ {{"` + "\n", "ü 😀 \t\r\n", "}} {{",
		"a: `b`\n", "`", "`}}", "{{`", "\r", "a: \\n\n",
	} {
		out := renderFrozen(t, job, map[string]string{"hostile/templates/cm.yaml": text})
		if got := out["hostile/templates/cm.yaml"]; got != text {
			t.Errorf("froze %q, Helm rendered %q", text, got)
		}
	}
}

// The frozen chart costs Helm's parser about its output's size, however many "{{" it holds:
// one action per "{{" cost two hundred times the output, in the executor, unbounded.
func TestAFrozenChartOfBracesCostsItsSize(t *testing.T) {
	text := "# " + strings.Repeat("{{", 512<<10) // 1 MiB
	job := oneTemplate("x")
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	out := renderFrozen(t, job, map[string]string{"hostile/templates/cm.yaml": text})
	runtime.ReadMemStats(&after)
	if out["hostile/templates/cm.yaml"] != text {
		t.Fatal("the frozen chart did not render its output")
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16*uint64(len(text)) {
		t.Errorf("freezing and rendering %d KiB of output allocated %d MiB, want at most 16x the output", len(text)>>10, alloc>>20)
	}
}

// What a worker answers is what Helm applies: output Helm's render would change (a
// "<no value>" built of two halves) or Helm's YAML parse would refuse (bytes not UTF-8)
// is a template error.
func TestAWorkerRefusesOutputThatWouldNotReachHelmAsIs(t *testing.T) {
	p := &RenderPool{}
	t.Cleanup(p.Close)
	for name, tpl := range map[string]string{
		"no value": `k: "<no {{ .Values.missing }}value>"`,
		"not utf8": `k: "{{ "\xff\xfe" }}"`,
	} {
		_, _, err := p.Render(context.Background(), PoolRender{Job: oneTemplate(tpl)})
		if !errors.Is(err, ErrRenderFailed) {
			t.Errorf("%s: %v, want ErrRenderFailed", name, err)
		}
	}
	files, _, err := p.Render(context.Background(), PoolRender{Job: oneTemplate(`k: "{{ .Values.missing }}"`)})
	if err != nil || files["hostile/templates/cm.yaml"] != `k: ""` {
		t.Errorf("a missing value: %q, %v; want Helm's empty text", files, err)
	}
}

// recordingGate records the wait gate's calls.
type recordingGate struct {
	mu    sync.Mutex
	calls []string
}

func (g *recordingGate) Waiting() { g.mu.Lock(); g.calls = append(g.calls, "waiting"); g.mu.Unlock() }
func (g *recordingGate) Working() { g.mu.Lock(); g.calls = append(g.calls, "working"); g.mu.Unlock() }

// A render in the pool holds no CPU slot: the slot is given back before the wait for a
// worker and taken again after the render, once; lookups do not touch it.
func TestARenderInThePoolGivesItsCPUSlotBack(t *testing.T) {
	f := &Factory{renders: &RenderPool{}}
	t.Cleanup(f.renders.Close)
	g := &recordingGate{}
	ch := &chart.Chart{Metadata: &chart.Metadata{APIVersion: "v2", Name: "c", Version: "0.1.0"},
		Templates: []*chart.File{{Name: "templates/a.yaml", Data: []byte("a: b")}}}
	job := GuardRender{Chart: TreeOf(ch), Release: chartutil.ReleaseOptions{Name: "web", Namespace: "ns", Revision: 1, IsInstall: true}}
	if _, err := f.renderInPool(context.Background(), g, PoolRender{Job: job}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(g.calls, ","); got != "waiting,working" {
		t.Errorf("gate calls %q, want waiting,working", got)
	}
}
