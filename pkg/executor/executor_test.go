package executor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/async-helm/async-helm/internal/fakekube"
	"github.com/async-helm/async-helm/internal/testwait"
	chartref "github.com/async-helm/async-helm/pkg/chart/ref"
	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/progress"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
	"github.com/async-helm/async-helm/pkg/release/lease"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// fakeHelm runs what the test says instead of Helm, and counts the runs.
type fakeHelm struct {
	calls  atomic.Int32
	mu     sync.Mutex
	reqs   []helmexec.Request
	fences []*helmexec.Fence
	gates  map[string]helmexec.WaitGate // by release name
	apis   map[string]helmexec.APIGate  // by release name
	run    func(ctx context.Context, req helmexec.Request) (*helmrelease.Release, error)
}

func (h *fakeHelm) do(ctx context.Context, req helmexec.Request, opts []helmexec.Option) (*helmrelease.Release, error) {
	h.calls.Add(1)
	h.mu.Lock()
	h.reqs = append(h.reqs, req)
	h.fences = append(h.fences, helmexec.FenceOf(opts...))
	if h.gates == nil {
		h.gates = map[string]helmexec.WaitGate{}
	}
	h.gates[req.Name] = helmexec.WaitGateOf(opts...)
	if h.apis == nil {
		h.apis = map[string]helmexec.APIGate{}
	}
	h.apis[req.Name] = helmexec.APIGateOf(opts...)
	h.mu.Unlock()
	return h.run(ctx, req)
}

// gate is the wait gate of the run of release name (as Helm's kube client would see it).
func (h *fakeHelm) gate(name string) helmexec.WaitGate {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.gates[name]
}

// api is the API gate of the run of release name (as Helm's kube client would see it).
func (h *fakeHelm) api(name string) helmexec.APIGate {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.apis[name]
}

// fence is the fence of the i-th run.
func (h *fakeHelm) fence(i int) *helmexec.Fence {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fences[i]
}

func (h *fakeHelm) Install(ctx context.Context, req helmexec.Request, opts ...helmexec.Option) (*helmrelease.Release, error) {
	return h.do(ctx, req, opts)
}

func (h *fakeHelm) Upgrade(ctx context.Context, req helmexec.Request, opts ...helmexec.Option) (*helmrelease.Release, error) {
	return h.do(ctx, req, opts)
}

func (h *fakeHelm) Uninstall(ctx context.Context, req helmexec.Request, opts ...helmexec.Option) (*helmrelease.Release, error) {
	return h.do(ctx, req, opts)
}

func (h *fakeHelm) Rollback(ctx context.Context, req helmexec.Request, opts ...helmexec.Option) (*helmrelease.Release, error) {
	return h.do(ctx, req, opts)
}

// deployed is a fake Helm that only says it deployed; newEnv's default also writes it.
// Client has no cluster behind it: the progress reads are skipped.
func (h *fakeHelm) Readiness() progress.ReadyFunc { return nil }

func (h *fakeHelm) Client(...helmexec.Option) (kubernetes.Interface, error) {
	return nil, errors.New("no cluster in unit tests")
}

func deployed(context.Context, helmexec.Request) (*helmrelease.Release, error) {
	return &helmrelease.Release{Info: &helmrelease.Info{Status: helmrelease.StatusDeployed}}, nil
}

// writes records the revision deployed, as Helm's adoption and final write do.
func (e *env) writes(ctx context.Context, req helmexec.Request) (*helmrelease.Release, error) {
	d := storage.NewSecrets(e.c.CoreV1().Secrets(req.Namespace))
	rel, err := d.Get(release.SecretName(req.Name, req.Revision))
	if err != nil {
		return nil, err
	}
	rel.Info.Status, rel.Info.Description = helmrelease.StatusDeployed, "Install complete"
	return rel, d.Update(release.SecretName(req.Name, req.Revision), rel)
}

// charts serves one packaged chart.
type charts struct{ c *chartsource.Chart }

func (c charts) Get(context.Context, chartref.Ref) (*chartsource.Chart, error) { return c.c, nil }

func packaged(t *testing.T) *chartsource.Chart {
	t.Helper()
	ch := &chart.Chart{Metadata: &chart.Metadata{Name: "tiny", Version: "1.0.0", APIVersion: "v2"},
		Templates: []*chart.File{{Name: "templates/cm.yaml", Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")}}}
	return repackage(t, nil, ch)
}

// repackage archives ch as a chart source would have downloaded it.
func repackage(t *testing.T, _ *chartsource.Chart, ch *chart.Chart) *chartsource.Chart {
	t.Helper()
	dir := t.TempDir()
	path, err := chartutil.Save(ch, dir)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Clean(path))
	if err != nil {
		t.Fatal(err)
	}
	return &chartsource.Chart{Digest: "sha256:x", Data: data, Loaded: ch}
}

type env struct {
	t     *testing.T
	c     *fakekube.Cluster
	clock *fakekube.Clock
	store *release.Store
	helm  *fakeHelm
	svc   *Service
	// consumed holds the consumed-request records (async-helm's own namespace).
	consumed *consumed.Store
}

func newEnv(t *testing.T, parallel int) *env {
	t.Helper()
	clock := fakekube.NewClock(t0)
	c := fakekube.New(clock)
	e := &env{t: t, c: c, clock: clock, store: &release.Store{Client: c, Metadata: c.Metadata(), Clock: clock},
		helm: &fakeHelm{}}
	e.helm.run = e.writes
	e.consumed = &consumed.Store{Client: c, Namespace: "async-helm", Clock: clock}
	e.svc = New(Service{Store: e.store, Helm: e.helm, Charts: charts{packaged(t)}, Consumed: e.consumed,
		Heartbeat: HeartbeatLeases(&lease.Heartbeat{Client: c, Holder: "pod", Duration: time.Minute, Clock: clock}),
		Log:       zap.NewNop().Sugar(), MaxActionTime: time.Minute}, parallel)
	return e
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// reserve reserves name v1 for request id and returns the accepted event's payload.
func (e *env) reserve(name, id string) events.Action {
	e.t.Helper()
	if _, err := e.store.Reserve(ctx(e.t), release.Reservation{Namespace: "ns", Name: name, Action: release.ActionInstall,
		Chart: &chart.Metadata{Name: "tiny", Version: "1.0.0"}, RequestID: id}); err != nil {
		e.t.Fatal(err)
	}
	return events.Action{Action: release.ActionInstall, Namespace: "ns", Name: name, Revision: 1,
		SecretName: release.SecretName(name, 1), RequestID: id, Chart: chartref.Ref{URL: "https://charts.example/tiny-1.0.0.tgz"},
		Options: events.Options{Timeout: 5 * time.Minute}}
}

func (e *env) status(name string) (helmrelease.Status, string) {
	e.t.Helper()
	return e.statusIn("ns", name)
}

// statusIn is the status and description of revision 1 of name in namespace ns.
func (e *env) statusIn(ns, name string) (helmrelease.Status, string) {
	e.t.Helper()
	rel, err := e.store.Get(ctx(e.t), ns, name, 1)
	if err != nil {
		e.t.Fatal(err)
	}
	return rel.Info.Status, rel.Info.Description
}

func (e *env) leaseExists(name string) bool {
	_, err := e.c.CoordinationV1().Leases("ns").Get(ctx(e.t), release.LeaseName(name, 1), metav1.GetOptions{})
	return err == nil
}

// How each Helm result maps to an outcome and to the revision's record.
func TestOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		run      func(ctx context.Context, req helmexec.Request) (*helmrelease.Release, error)
		shutdown bool
		outcome  Outcome
		status   helmrelease.Status // of the revision afterwards (the fake Helm writes nothing)
		reason   string
	}{
		{"deployed", nil, false, OutcomeDeployed, helmrelease.StatusDeployed, "Install complete"},
		{"Helm's failed release", func(context.Context, helmexec.Request) (*helmrelease.Release, error) {
			return &helmrelease.Release{Info: &helmrelease.Info{Status: helmrelease.StatusFailed}}, nil
		}, false, OutcomeFailed, helmrelease.StatusPendingInstall, release.ReservedDescription},
		{"Helm refused before adopting", func(context.Context, helmexec.Request) (*helmrelease.Release, error) {
			return nil, errors.New("rendering failed: bad template")
		}, false, OutcomeFailed, helmrelease.StatusFailed, "rendering failed: bad template"},
		{"deadline", func(ctx context.Context, _ helmexec.Request) (*helmrelease.Release, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}, false, OutcomeFailed, helmrelease.StatusFailed, `Release "web" failed: timed out after 50ms`},
		{"executor shut down", func(ctx context.Context, _ helmexec.Request) (*helmrelease.Release, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}, true, OutcomeFailed, helmrelease.StatusFailed, `Release "web" failed: the executor shut down while the action ran`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 2)
			if tc.run != nil {
				e.helm.run = tc.run
			}
			a := e.reserve("web", "req-1")
			if tc.name == "deadline" {
				a.Options.Timeout = 50 * time.Millisecond
			}
			shutdown, stop := context.WithCancel(context.Background())
			defer stop()
			if tc.shutdown {
				e.helm.run = func(ctx context.Context, req helmexec.Request) (*helmrelease.Release, error) {
					stop()
					return tc.run(ctx, req)
				}
			}
			var observed string
			e.svc.Observe = func(action, outcome string, _ time.Duration) { observed = action + "/" + outcome }
			got, err := e.svc.Handle(ctx(t), shutdown, a, nil)
			if err != nil || got != tc.outcome {
				t.Fatalf("Handle = %s, %v; want %s", got, err, tc.outcome)
			}
			if observed != "install/"+string(tc.outcome) {
				t.Errorf("observed %q", observed)
			}
			st, desc := e.status("web")
			if st != tc.status || !strings.HasPrefix(desc, tc.reason) {
				t.Errorf("revision %s %q, want %s %q", st, desc, tc.status, tc.reason)
			}
			if e.leaseExists("web") {
				t.Error("the lease was not released")
			}
		})
	}
}

// Events that must not run Helm.
func TestNoHelmRun(t *testing.T) {
	for _, tc := range []struct {
		name    string
		setup   func(e *env) events.Action
		outcome Outcome
		err     error
	}{
		{"reservation taken back", func(e *env) events.Action {
			a := e.reserve("web", "req-1")
			_ = e.c.CoreV1().Secrets("ns").Delete(ctx(e.t), a.SecretName, metav1.DeleteOptions{})
			return a
		}, OutcomeGone, nil},
		{"revision final", func(e *env) events.Action {
			a := e.reserve("web", "req-1")
			if _, err := e.store.MarkFailed(ctx(e.t), "ns", "web", 1, "x", release.KeepFailed); err != nil {
				e.t.Fatal(err)
			}
			return a
		}, OutcomeDuplicate, nil},
		{"stale request id of a reused revision", func(e *env) events.Action {
			a := e.reserve("web", "req-new")
			a.RequestID = "req-old"
			return a
		}, OutcomeStale, nil},
		{"another executor's live lease", func(e *env) events.Action {
			a := e.reserve("web", "req-1")
			other := &lease.Heartbeat{Client: e.c, Holder: "other", Duration: time.Minute, Clock: e.clock}
			if h, err := other.Hold(ctx(e.t), "ns", release.LeaseName("web", 1)); h == nil || err != nil {
				e.t.Fatal(h, err)
			}
			return a
		}, "", ErrHeldElsewhere},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 2)
			a := tc.setup(e)
			got, err := e.svc.Handle(ctx(t), context.Background(), a, nil)
			if got != tc.outcome || !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
				t.Fatalf("Handle = %q, %v; want %q, %v", got, err, tc.outcome, tc.err)
			}
			if n := e.helm.calls.Load(); n != 0 {
				t.Errorf("Helm ran %d times", n)
			}
		})
	}
}

// An expired lease of a dead executor is taken over, and the action runs.
func TestExpiredLeaseIsTakenOver(t *testing.T) {
	e := newEnv(t, 1)
	a := e.reserve("web", "req-1")
	dead := &lease.Heartbeat{Client: e.c, Holder: "dead", Duration: time.Minute, Clock: e.clock}
	if h, err := dead.Hold(ctx(t), "ns", release.LeaseName("web", 1)); h == nil || err != nil {
		t.Fatal(h, err)
	}
	e.clock.Add(2 * time.Minute)
	if got, err := e.svc.Handle(ctx(t), context.Background(), a, nil); err != nil || got != OutcomeDeployed {
		t.Fatalf("Handle = %s, %v", got, err)
	}
}

// A redelivery to the pod that runs the revision waits for that run: Helm runs once. One
// copy waits; every further copy is answered at once (held elsewhere), so a tenant that
// re-posts its stored event cannot keep requests open on the pod.
func TestRedeliveryJoinsTheRun(t *testing.T) {
	e := newEnv(t, 4)
	release1 := make(chan struct{})
	started := make(chan struct{})
	e.helm.run = func(ctx context.Context, req helmexec.Request) (*helmrelease.Release, error) {
		close(started)
		<-release1
		return e.writes(ctx, req)
	}
	a := e.reserve("web", "req-1")
	outcomes := make(chan Outcome, 2)
	go func() { o, _ := e.svc.Handle(ctx(t), context.Background(), a, nil); outcomes <- o }()
	<-started
	go func() { o, _ := e.svc.Handle(ctx(t), context.Background(), a, nil); outcomes <- o }()
	testwait.For(t, func() bool { return e.svc.joined(runKey(a)) == 1 })
	for i := range 100 {
		if _, err := e.svc.Handle(ctx(t), context.Background(), a, nil); !errors.Is(err, ErrHeldElsewhere) {
			t.Fatalf("copy %d of a running delivery with one copy waiting: %v, want ErrHeldElsewhere at once", i, err)
		}
	}
	close(release1)
	got := map[Outcome]int{}
	for i := 0; i < 2; i++ {
		got[<-outcomes]++
	}
	if got[OutcomeDeployed] != 1 || got[OutcomeDuplicate] != 1 || e.helm.calls.Load() != 1 {
		t.Errorf("outcomes %v, Helm ran %d times", got, e.helm.calls.Load())
	}
	if n := e.svc.joined(runKey(a)); n != 0 {
		t.Errorf("%d copies still counted after the run", n)
	}
	// A redelivery whose sender gave up while waiting asks for a later redelivery.
	block := make(chan struct{})
	e.helm.run = func(ctx context.Context, req helmexec.Request) (*helmrelease.Release, error) {
		<-block
		return e.writes(ctx, req)
	}
	b := e.reserve("db", "req-2")
	go func() { _, _ = e.svc.Handle(ctx(t), context.Background(), b, nil) }()
	testwait.For(t, func() bool { return e.helm.calls.Load() == 2 })
	gone, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := e.svc.Handle(gone, context.Background(), b, nil); !errors.Is(err, ErrHeldElsewhere) {
		t.Errorf("a cancelled redelivery: %v", err)
	}
	close(block)
}

// joined is how many redeliveries wait for the run of key.
func (s *Service) joined(key string) int {
	s.running.mu.Lock()
	defer s.running.mu.Unlock()
	if r := s.running.m[key]; r != nil {
		return r.joined
	}
	return 0
}

// With every slot busy a delivery waits up to SlotWait, then ErrBusy.
func TestSlotWait(t *testing.T) {
	e := newEnv(t, 1)
	e.svc.SlotWait = 50 * time.Millisecond
	hold := make(chan struct{})
	e.helm.run = func(ctx context.Context, req helmexec.Request) (*helmrelease.Release, error) {
		if req.Name == "a" {
			<-hold
		}
		return deployed(ctx, req)
	}
	a, b := e.reserve("a", "r1"), e.reserve("b", "r2")
	done := make(chan Outcome)
	go func() { o, _ := e.svc.Handle(ctx(t), context.Background(), a, nil); done <- o }()
	testwait.For(t, func() bool { return e.helm.calls.Load() == 1 })
	start := time.Now()
	if _, err := e.svc.Handle(ctx(t), context.Background(), b, nil); !errors.Is(err, ErrBusy) {
		t.Fatalf("second delivery with no slot: %v", err)
	}
	if waited := time.Since(start); waited < 50*time.Millisecond {
		t.Errorf("gave up after %s, before SlotWait", waited)
	}
	// A slot freed while waiting is taken.
	e.svc.SlotWait = 10 * time.Second
	res := make(chan Outcome)
	go func() { o, _ := e.svc.Handle(ctx(t), context.Background(), b, nil); res <- o }()
	close(hold)
	if o := <-done; o != OutcomeDeployed {
		t.Errorf("first: %s", o)
	}
	if o := <-res; o != OutcomeDeployed {
		t.Errorf("waiting delivery: %s", o)
	}
}

// A lost lease cancels the action; the revision is left to its new owner.
func TestLostLeaseCancels(t *testing.T) {
	e := newEnv(t, 1)
	e.svc.Heartbeat = losingLeases{}
	e.helm.run = func(ctx context.Context, _ helmexec.Request) (*helmrelease.Release, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	a := e.reserve("web", "req-1")
	got, err := e.svc.Handle(ctx(t), context.Background(), a, nil)
	if err != nil || got != OutcomeFailed {
		t.Fatalf("Handle = %s, %v", got, err)
	}
	if st, desc := e.status("web"); st != helmrelease.StatusPendingInstall || desc != release.ReservedDescription {
		t.Errorf("an action that lost its lease wrote the revision: %s %q", st, desc)
	}
}

type losingLeases struct{}

func (losingLeases) Hold(context.Context, string, string, string) (Lease, error) {
	return losingLease{}, nil
}

type losingLease struct{}

func (losingLease) Keep(_ context.Context, lost func(string))            { lost("taken over by test") }
func (losingLease) Release(context.Context) error                        { panic("a lost lease must not be released") }
func (losingLease) Sync(context.Context, string, string) (string, error) { return "", nil }
func (losingLease) CancelledBy() string                                  { return "" }

// What the executor asks Helm for.
func TestRequest(t *testing.T) {
	e := newEnv(t, 1)
	a := e.reserve("web", "req-1")
	a.Values = map[string]any{"replicas": 3}
	a.Options = events.Options{Timeout: time.Hour, Wait: true, WaitForJobs: true, Atomic: true, Description: "d"}
	if _, err := e.svc.Handle(ctx(t), context.Background(), a, []byte("EV")); err != nil {
		t.Fatal(err)
	}
	req := e.helm.reqs[0]
	if req.Timeout != time.Minute {
		t.Errorf("timeout %s, want MaxActionTime", req.Timeout)
	}
	if req.Name != "web" || req.Namespace != "ns" || req.Revision != 1 || !req.Wait || !req.WaitForJobs || !req.Atomic ||
		req.Description != "d" || req.Values["replicas"] != 3 || req.Chart == nil || req.Chart.Metadata.Name != "tiny" {
		t.Errorf("request %+v", req)
	}
	if req.Labels[release.LabelRequestID] != "req-1" || req.Labels[release.LabelRevision] != "1" || req.Labels[release.LabelChart] != "tiny-1.0.0" {
		t.Errorf("labels %v", req.Labels)
	}
	// Each action gets its own copy of the chart: Helm mutates it.
	if req.Chart == e.svc.Charts.(charts).c.Loaded {
		t.Error("the shared chart was handed to Helm")
	}
	// A reused chart keeps the reservation's chart label.
	b := e.reserve("db", "req-2")
	b.ReuseChart = true
	if _, err := e.svc.Handle(ctx(t), context.Background(), b, nil); err != nil {
		t.Fatal(err)
	}
	if r := e.helm.reqs[1]; r.Chart != nil || r.Labels[release.LabelChart] != "tiny-1.0.0" {
		t.Errorf("reused chart request: chart %v labels %v", r.Chart, r.Labels)
	}
}
