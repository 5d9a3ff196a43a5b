package helmexec

import (
	"context"
	"errors"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"

	"github.com/async-helm/async-helm/pkg/fairqueue"
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

// queuedFor waits until n renders of flow wait for a worker of p.
func queuedFor(p *RenderPool, f fairqueue.Flow, n int) {
	for {
		if p.seats != nil {
			for _, s := range p.seats.Stats() {
				if s.Flow == f && s.Queued == n {
					return
				}
			}
		}
		runtime.Gosched()
	}
}

// tenantRender renders a lookup of Secret name in tenant's namespace as tenant, in p.
func tenantRender(ctx context.Context, p *RenderPool, api *fakeAPI, tenant, name string) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, _, err := p.Render(ctx, PoolRender{Flow: fairqueue.Flow{Namespace: tenant, Caller: tenant + "-deployer"},
			Job: lookupTemplate(tenant, name), Lookup: NewLookups(api.as(tenant + "-deployer"))})
		done <- err
	}()
	return done
}

// Workers go to tenants in turn, not first come, first served: with one worker, held by
// tenant A's render while A has more queued, the worker goes next to tenant B, which
// came last but holds none.
func TestRenderWorkersGoToTheTenantHoldingFewest(t *testing.T) {
	api := newFakeAPI(t)
	p := &RenderPool{Limits: RenderLimits{MaxParallel: 1}}
	t.Cleanup(p.Close)
	order := []struct{ tenant, name string }{{"tenant-a", "a1"}, {"tenant-a", "a2"}, {"tenant-a", "a3"}, {"tenant-b", "b1"}}
	for _, o := range order {
		api.hold(secretPath(o.tenant, o.name))
	}
	var done []<-chan error
	queued := map[string]int{}
	for i, o := range order {
		done = append(done, tenantRender(ctx(t), p, api, o.tenant, o.name))
		if i == 0 {
			if got := <-api.arrived; got != secretPath("tenant-a", "a1") {
				t.Fatalf("first lookup %s", got)
			}
			continue
		}
		queued[o.tenant]++
		queuedFor(p, fairqueue.Flow{Namespace: o.tenant, Caller: o.tenant + "-deployer"}, queued[o.tenant])
	}
	var served []string
	api.open(secretPath("tenant-a", "a1"))
	for range order[1:] {
		got := <-api.arrived
		served = append(served, path.Base(got))
		api.open(got)
	}
	for i, d := range done {
		if err := <-d; err != nil {
			t.Errorf("render %s: %v", order[i].name, err)
		}
	}
	if got, want := strings.Join(served, ","), "b1,a2,a3"; got != want {
		t.Errorf("after a1 the worker served %s, want %s", got, want)
	}
}

// A tenant's renders waiting on slow lookups do not make another tenant wait for them:
// tenant A's two renders hold both workers, each waiting on its lookup, and tenant B's
// render runs meanwhile, on a worker of its own.
func TestLookupsOfOneTenantDoNotHoldAnotherOffTheWorkers(t *testing.T) {
	api := newFakeAPI(t)
	var mu sync.Mutex
	var pids []int
	p := &RenderPool{Limits: RenderLimits{MaxParallel: 2}, started: func(pid int) { mu.Lock(); pids = append(pids, pid); mu.Unlock() }}
	t.Cleanup(p.Close)
	a1, a2 := secretPath("tenant-a", "a1"), secretPath("tenant-a", "a2")
	api.hold(a1)
	api.hold(a2)
	held, cancel := context.WithCancel(context.Background()) // A's renders wait as long as B's takes
	t.Cleanup(cancel)
	da1, da2 := tenantRender(held, p, api, "tenant-a", "a1"), tenantRender(held, p, api, "tenant-a", "a2")
	<-api.arrived
	<-api.arrived
	if err := <-tenantRender(ctx(t), p, api, "tenant-b", "b1"); err != nil {
		t.Fatalf("tenant B's render while A's two wait on their lookups: %v", err)
	}
	api.open(a1)
	api.open(a2)
	if err1, err2 := <-da1, <-da2; err1 != nil || err2 != nil {
		t.Errorf("tenant A's renders: %v, %v", err1, err2)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(pids) != 3 {
		t.Errorf("%d workers started, want 3 (B's on the seat A lent)", len(pids))
	}
	if len(p.idle) > 2 {
		t.Errorf("%d idle workers kept, want at most MaxParallel", len(p.idle))
	}
}

// A worker serves one tenant: the next tenant's render gets a worker of its own, never
// the one another tenant's templates ran in, and a tenant's next render reuses its own.
func TestAWorkerServesOneTenant(t *testing.T) {
	var pids []int
	p := &RenderPool{Limits: RenderLimits{MaxParallel: 2}, started: func(pid int) { pids = append(pids, pid) }}
	t.Cleanup(p.Close)
	a := fairqueue.Flow{Namespace: "tenant-a", Caller: "tenant-a-deployer"}
	b := fairqueue.Flow{Namespace: "tenant-b", Caller: "tenant-b-deployer"}
	c := fairqueue.Flow{Namespace: "tenant-c", Caller: "tenant-c-deployer"}
	for i, flow := range []fairqueue.Flow{a, b, a, b, c, a} {
		if _, _, err := p.Render(context.Background(), PoolRender{Flow: flow, Job: oneTemplate("pid: {{ .Release.Name }}")}); err != nil {
			t.Fatalf("render %d: %v", i, err)
		}
	}
	// a, b: two workers; a, b again: theirs; c: a third, a's (least recently used) stops;
	// a: a fourth.
	if len(pids) != 4 {
		t.Errorf("%d workers started for the renders of a, b, a, b, c, a (2 kept idle), want 4", len(pids))
	}
}
