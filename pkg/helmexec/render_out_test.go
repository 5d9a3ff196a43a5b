package helmexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	helmrelease "helm.sh/helm/v3/pkg/release"
	helmtime "helm.sh/helm/v3/pkg/time"
	kubefake4 "helm.sh/helm/v4/pkg/kube/fake"
	"k8s.io/client-go/rest"

	"github.com/async-helm/async-helm/pkg/fairqueue"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

// offlineOn is offline (helmexec_test.go) with the factory's options.
func offlineOn(t *testing.T, fo ...FactoryOption) (*Factory, *storage.Memory, []Option) {
	t.Helper()
	f, err := NewFactory(&rest.Config{Host: "http://127.0.0.1:1"}, fo...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.renders.Close)
	mem := storage.NewMemory()
	mem.SetNamespace("ns")
	return f, mem, []Option{WithDriver(mem), WithCapabilities(chartutil.DefaultCapabilities),
		WithKubeClient(&kubefake.PrintingKubeClient{Out: io.Discard})}
}

// workers is a pool of render workers for one test.
func workers(t *testing.T) *RenderPool {
	p := &RenderPool{}
	t.Cleanup(p.Close)
	return p
}

// comparable is what a record holds, as Helm stores it, but the times.
func comparable(t *testing.T, r *helmrelease.Release) string {
	t.Helper()
	c := *r
	info := *r.Info
	info.FirstDeployed, info.LastDeployed, info.Deleted = helmtime.Time{}, helmtime.Time{}, helmtime.Time{}
	c.Info = &info
	var hooks []*helmrelease.Hook
	for _, h := range r.Hooks {
		hc := *h
		hc.LastRun = helmrelease.HookExecution{Phase: h.LastRun.Phase}
		hooks = append(hooks, &hc)
	}
	c.Hooks = hooks
	b, err := json.Marshal(c) // as Helm stores it (the chart without its dependencies)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

type recordCase struct {
	name   string
	chart  func(t *testing.T) *chart.Chart
	values map[string]any
	// random matches what the chart renders at random (randAlphaNum): two renders differ there.
	random *regexp.Regexp
}

func chartDir(name string) func(t *testing.T) *chart.Chart {
	return func(t *testing.T) *chart.Chart {
		t.Helper()
		ch, err := loader.Load(filepath.Join("..", "..", "testdata", "charts", name))
		if err != nil {
			t.Fatal(err)
		}
		return ch
	}
}

// offlineEngine is offlineOn for engine e (Helm v4's printing kube client under v4).
func offlineEngine(t *testing.T, e Engine, fo ...FactoryOption) (*Factory, *storage.Memory, []Option) {
	t.Helper()
	f, mem, opts := offlineOn(t, append(fo, WithEngine(e))...)
	if e == EngineV4 {
		opts = append(opts[:2], WithV4KubeClient(&kubefake4.PrintingKubeClient{Out: io.Discard}))
	}
	return f, mem, opts
}

// An install and an upgrade rendered in a worker write the records Helm's own action
// writes when it renders the real chart in process, on either engine, for the charts of
// testdata (GitLab 6.5.4 too): the same manifest, hooks, notes, values and chart,
// failures too.
func TestRecordsRenderedInAWorkerAreHelms(t *testing.T) {
	for _, e := range []Engine{EngineV3, EngineV4} {
		t.Run(string(e), func(t *testing.T) { testRecordsRenderedInAWorker(t, e) })
	}
}

func testRecordsRenderedInAWorker(t *testing.T, e Engine) {
	gitlabValues, err := chartutil.ReadValuesFile(filepath.Join("..", "..", "testdata", "charts", "gitlab-values-offline.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []recordCase{
		{"tiny", chartDir("tiny"), map[string]any{"message": "{{ not a template }}"}, nil},
		{"note", chartDir("note"), nil, nil},
		{"clusterrole", chartDir("clusterrole"), nil, nil},
		{"hookfail", chartDir("hookfail"), nil, nil},
		{"posthookfail", chartDir("posthookfail"), nil, nil},
		{"flaky", chartDir("flaky"), nil, nil},
		{"badtemplate", chartDir("badtemplate"), nil, nil},
		{"gitlab", chartDir("gitlab-6.5.4.tgz"), gitlabValues, regexp.MustCompile(`(test-runner|shared-secrets-[0-9]+)-[a-z0-9]{3,5}\b`)},
	}
	pool := workers(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			helms, memIn, optsIn := offlineEngine(t, e)
			out, memOut, optsOut := offlineEngine(t, e, WithRenderWorkers(pool))
			for rev := 1; rev <= 2; rev++ {
				req := Request{Namespace: "ns", Name: "web", Revision: rev, Chart: c.chart(t), Values: c.values, Description: "by test"}
				run, status := (*Factory).Install, helmrelease.StatusPendingInstall
				if rev == 2 {
					run, status = (*Factory).Upgrade, helmrelease.StatusPendingUpgrade
				}
				reserve(t, memIn, "web", rev, status)
				reserve(t, memOut, "web", rev, status)
				errIn := helmsOwn(t, helms, req, optsIn)
				req.Chart = c.chart(t)
				_, errOut := run(out, ctx(t), req, optsOut...)
				if (errIn == nil) != (errOut == nil) {
					t.Fatalf("revision %d: Helm's own %v, in a worker %v", rev, errIn, errOut)
				}
				if errIn != nil {
					t.Logf("revision %d failed: Helm's own %v; in a worker %v", rev, errIn, errOut)
					return
				}
				sameRecords(t, rev, c.random, get(t, memIn, "web", rev), get(t, memOut, "web", rev))
			}
		})
	}
}

// sameRecords fails t where Helm's record and the worker's differ (but what random
// matches).
func sameRecords(t *testing.T, rev int, random *regexp.Regexp, helms, worker *helmrelease.Release) {
	t.Helper()
	a, b := comparable(t, helms), comparable(t, worker)
	if random != nil {
		a, b = random.ReplaceAllString(a, "RANDOM"), random.ReplaceAllString(b, "RANDOM")
	}
	if a == b {
		return
	}
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	from := max(i-300, 0)
	t.Fatalf("revision %d's records differ at byte %d:\nHelm's own ...%.600s\nin a worker ...%.600s", rev, i, a[from:], b[from:])
}

// helmsOwn runs Helm's own install (revision 1) or upgrade of req on the engine of f, on
// the real chart, rendered in this process: what the executor's action, rendering in a
// worker, must write.
func helmsOwn(t *testing.T, f *Factory, req Request, opts []Option) error {
	t.Helper()
	c := ctx(t)
	p, err := f.prepare(c, req, append(opts, ownedBy(req)))
	if err != nil {
		t.Fatal(err)
	}
	values := req.Values
	if req.Revision == 1 {
		_, err = p.install(c, req, req.Chart, values)
	} else if values, err = upgradeValues(p.cfg, req); err == nil {
		_, err = p.upgrade(c, req, req.Chart, values)
	}
	return checkAdopted(p.adopter, err)
}

// A template that builds a 400 MiB string fails the install with the memory reason, on
// either engine, and this process never holds the string.
func TestInstallOfATemplateOverItsMemory(t *testing.T) {
	for _, e := range []Engine{EngineV3, EngineV4} {
		t.Run(string(e), func(t *testing.T) { testInstallOverItsMemory(t, e) })
	}
}

func testInstallOverItsMemory(t *testing.T, e Engine) {
	pool := &RenderPool{Limits: RenderLimits{MaxMemoryBytes: 128 << 20}}
	t.Cleanup(pool.Close)
	f, mem, opts := offlineEngine(t, e, WithRenderWorkers(pool))
	reserve(t, mem, "big", 1, helmrelease.StatusPendingInstall)
	before := peakRSS(t)
	ch := &chart.Chart{Metadata: &chart.Metadata{APIVersion: "v2", Name: "big", Version: "0.1.0"},
		Templates: []*chart.File{{Name: "templates/cm.yaml", Data: []byte(`n: {{ $s := repeat 209715200 "xx" }}{{ len $s }}`)}}}
	_, err := f.Install(ctx(t), Request{Namespace: "ns", Name: "big", Revision: 1, Chart: ch}, opts...)
	if !errors.Is(err, ErrRenderMemory) || !strings.Contains(err.Error(), "the chart's templates used more than 128 MiB") {
		t.Fatalf("install: %v, want the memory reason", err)
	}
	if grew := peakRSS(t) - before; grew > 64<<20 {
		t.Errorf("this process's peak RSS grew by %d MiB", grew>>20)
	}
	if r := get(t, mem, "big", 1); r.Info.Status != helmrelease.StatusPendingInstall || r.Info.Description != release.ReservedDescription {
		t.Errorf("reservation %s %q, want it untouched for the executor to fail", r.Info.Status, r.Info.Description)
	}
}

// cpuSlot is an action's CPU slot as the executor holds it (pkg/executor's cpuPhase): a
// seat of a fair queue of CPU slots, given back while Helm only waits (Waiting) and taken
// again when the wait returns (Working).
type cpuSlot struct {
	ctx  context.Context
	q    *fairqueue.Queue
	flow fairqueue.Flow

	mu   sync.Mutex
	seat *fairqueue.Seat
}

func (c *cpuSlot) enter() error {
	seat, err := c.q.Acquire(c.ctx, c.flow)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.seat = seat
	c.mu.Unlock()
	return nil
}

func (c *cpuSlot) Waiting() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seat != nil {
		c.seat.Release()
		c.seat = nil
	}
}

func (c *cpuSlot) Working() { _ = c.enter() }

// A render's lookup runs through the executor's wait gate: one CPU slot, one worker. While
// tenant A's render waits on its lookup, A holds no CPU slot, so tenant B's action takes
// it and asks for the worker; A's lookup is answered, both renders finish, nothing waits
// on anything else.
func TestALookupThroughTheExecutorsWaitGate(t *testing.T) {
	api := newFakeAPI(t)
	f := &Factory{renders: &RenderPool{Limits: RenderLimits{MaxParallel: 1}}}
	t.Cleanup(f.renders.Close)
	cpu := fairqueue.New(1, fairqueue.Options{})
	c := ctx(t)
	run := func(tenant, name string) (*cpuSlot, <-chan error) {
		slot := &cpuSlot{ctx: c, q: cpu, flow: fairqueue.Flow{Namespace: tenant, Caller: tenant + "-deployer"}}
		done := make(chan error, 1)
		if err := slot.enter(); err != nil {
			t.Fatalf("%s's action takes the CPU slot: %v", tenant, err)
		}
		go func() {
			files, err := f.renderInPool(c, slot, PoolRender{Flow: slot.flow, Job: lookupTemplate(tenant, name), Lookup: NewLookups(api.as(tenant + "-deployer"))})
			if err == nil && files["hostile/templates/cm.yaml"] != "name: "+name {
				err = fmt.Errorf("rendered %v", files)
			}
			done <- err
		}()
		return slot, done
	}
	a1 := secretPath("tenant-a", "a1")
	api.hold(a1)
	slotA, doneA := run("tenant-a", "a1")
	<-api.arrived
	if n := cpu.InUse(); n != 0 {
		t.Errorf("while A's render waits on its lookup %d CPU slots are held, want 0", n)
	}
	slotB, doneB := run("tenant-b", "b1")
	queuedFor(f.renders, slotB.flow, 1)
	api.open(a1)
	if err := <-doneA; err != nil {
		t.Fatalf("A's render: %v", err)
	}
	slotA.Waiting() // A's action ends: its CPU slot goes back
	if err := <-doneB; err != nil {
		t.Fatalf("B's render: %v", err)
	}
	slotB.Waiting()
	if got := strings.Join(api.reachedPaths(), ","); got != "tenant-a-deployer "+a1+",tenant-b-deployer "+secretPath("tenant-b", "b1") {
		t.Errorf("the API server was asked %s", got)
	}
}

// Values are checked against the chart's schema in the tenant's worker, under the render's
// bounds, not in this process: a schema without references still costs its size times the
// values' (here an enum of 20,000 strings against 20,000 values), and its check is stopped
// at the render's CPU bound. Values that do not meet a schema get Helm's text.
func TestValuesAreCheckedInTheWorker(t *testing.T) {
	f, mem, opts := offlineOn(t, WithRenderWorkers(workers(t)))
	enum := make([]string, 20000)
	for i := range enum {
		enum[i] = fmt.Sprintf("e%d", i)
	}
	enum[len(enum)-1] = "z"
	items := make([]any, 20000)
	for i := range items {
		items[i] = "z"
	}
	costly, err := json.Marshal(map[string]any{"type": "object", "properties": map[string]any{
		"items": map[string]any{"type": "array", "items": map[string]any{"enum": enum}}}})
	if err != nil {
		t.Fatal(err)
	}
	withSchema := func(schema string) *chart.Chart {
		ch := tiny("1.0.0")
		ch.Schema = []byte(schema)
		return ch
	}
	reserve(t, mem, "costly", 1, helmrelease.StatusPendingInstall)
	_, err = f.Install(ctx(t), Request{Namespace: "ns", Name: "costly", Revision: 1, Chart: withSchema(string(costly)),
		Values: map[string]any{"items": items}, RenderTimeout: 200 * time.Millisecond}, opts...)
	if !errors.Is(err, ErrValuesUnchecked) || !errors.Is(err, ErrRenderTimeout) {
		t.Errorf("install with a check of 20,000 x 20,000: %v, want %v at the render's CPU bound", err, ErrValuesUnchecked)
	}
	reserve(t, mem, "invalid", 1, helmrelease.StatusPendingInstall)
	_, err = f.Install(ctx(t), Request{Namespace: "ns", Name: "invalid", Revision: 1,
		Chart: withSchema(`{"properties": {"v": {"type": "integer"}}}`)}, opts...)
	if !errors.Is(err, ErrValuesInvalid) || !strings.Contains(err.Error(), "want integer") {
		t.Errorf("install with values that do not meet the schema: %v, want %v", err, ErrValuesInvalid)
	}
}
