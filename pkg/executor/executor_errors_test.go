package executor

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"k8s.io/utils/clock"

	"github.com/async-helm/async-helm/internal/fakekube"
	"github.com/async-helm/async-helm/internal/testwait"
	chartref "github.com/async-helm/async-helm/pkg/chart/ref"
	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/release/lease"
)

// Errors reading the world are the delivery's (redelivered later), never an outcome.
func TestTransientErrorsAskForRedelivery(t *testing.T) {
	e := newEnv(t, 1)
	a := e.reserve("web", "req-1")
	e.c.Fail("get", "secrets", errors.New("apiserver down"))
	if o, err := e.svc.Handle(ctx(t), context.Background(), a, nil); err == nil || o != "" {
		t.Errorf("a failed read: %q, %v", o, err)
	}
	e.c.Fail("get", "secrets", nil)
	e.c.Fail("get", "leases", errors.New("apiserver down"))
	if o, err := e.svc.Handle(ctx(t), context.Background(), a, nil); err == nil || o != "" {
		t.Errorf("a failed lease read: %q, %v", o, err)
	}
	e.c.Fail("get", "leases", nil)
	if e.helm.calls.Load() != 0 {
		t.Error("Helm ran")
	}
	// The running set was cleared on the way out: the next delivery runs.
	if o, err := e.svc.Handle(ctx(t), context.Background(), a, nil); err != nil || o != OutcomeDeployed {
		t.Errorf("after the errors: %q, %v", o, err)
	}
}

// A redelivery waiting for a run that ended in an error of its own (no slot) tries itself.
func TestJoinedRunThatFailedIsRetried(t *testing.T) {
	e := newEnv(t, 1)
	e.svc.SlotWait = 0
	hold := make(chan struct{})
	e.helm.run = func(ctx context.Context, req helmexec.Request) (*helmrelease.Release, error) {
		if req.Name == "busy" {
			<-hold
		}
		return e.writes(ctx, req)
	}
	busy, web := e.reserve("busy", "r0"), e.reserve("web", "r1")
	go func() { _, _ = e.svc.Handle(ctx(t), context.Background(), busy, nil) }()
	testwait.For(t, func() bool { return e.helm.calls.Load() == 1 })
	if _, err := e.svc.Handle(ctx(t), context.Background(), web, nil); !errors.Is(err, ErrBusy) {
		t.Fatalf("no slot: %v", err)
	}
	close(hold)
	testwait.For(t, func() bool { return e.svc.joined(runKey(busy)) == 0 && e.svc.slots.InUse() == 0 })
	if o, err := e.svc.Handle(ctx(t), context.Background(), web, nil); err != nil || o != OutcomeDeployed {
		t.Errorf("retry with a free slot: %q, %v", o, err)
	}
}

type failingCharts struct{}

func (failingCharts) Get(context.Context, chartref.Ref) (*chartsource.Chart, error) {
	return nil, chartsource.ErrNotFound
}

// A chart that cannot be had, or misses a dependency, fails the revision with the reason.
func TestChartProblemsFailTheRevision(t *testing.T) {
	for _, tc := range []struct {
		name   string
		charts Charts
		reason string
	}{
		{"chart gone", failingCharts{}, "chart https://charts.example/tiny-1.0.0.tgz"},
		{"unloadable archive", charts{&chartsource.Chart{Data: []byte("not a tgz")}}, "chart cannot be loaded"},
		// The chart behind the event's reference is not the one the record was reserved for.
		{"another chart", charts{repackage(t, nil, &chart.Chart{Metadata: &chart.Metadata{Name: "other", Version: "1.0.0", APIVersion: "v2"}})},
			"the record was reserved for tiny 1.0.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 1)
			e.svc.Charts = tc.charts
			a := e.reserve("web", "req-1")
			o, err := e.svc.Handle(ctx(t), context.Background(), a, nil)
			if err != nil || o != OutcomeFailed {
				t.Fatalf("Handle = %q, %v", o, err)
			}
			if st, desc := e.status("web"); st != helmrelease.StatusFailed || !strings.Contains(desc, tc.reason) {
				t.Errorf("revision %s %q, want failed with %q", st, desc, tc.reason)
			}
			if e.helm.calls.Load() != 0 {
				t.Error("Helm ran")
			}
		})
	}
}

func TestHeartbeatLeasesAdapter(t *testing.T) {
	e := newEnv(t, 1)
	l := HeartbeatLeases(&lease.Heartbeat{Client: e.c, Holder: "a", Duration: time.Minute, Clock: e.clock})
	first, err := l.Hold(ctx(t), "ns", "k", "req-1")
	if err != nil || first == nil {
		t.Fatal(first, err)
	}
	second, err := l.Hold(ctx(t), "ns", "k", "req-1")
	if err != nil || second != nil {
		t.Errorf("a held lease must come back as a nil Lease, got %#v, %v", second, err)
	}
	if err := first.Release(ctx(t)); err != nil {
		t.Fatal(err)
	}
}

// The action's deadline is the request's timeout, capped by MaxActionTime; without a
// timeout the cap applies, and without a cap the request's own.
func TestActionTimeout(t *testing.T) {
	for _, tc := range []struct {
		name         string
		timeout, max time.Duration
		want         time.Duration
	}{
		{"below the cap", time.Minute, time.Hour, time.Minute},
		{"above the cap", 2 * time.Hour, time.Hour, time.Hour},
		{"no timeout", 0, time.Hour, time.Hour},
		{"no cap", 3 * time.Minute, 0, 3 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 1)
			e.svc.MaxActionTime = tc.max
			clock := &afterFuncs{Clock: e.clock}
			e.svc.Clock = clock
			a := e.reserve("web", "req-1")
			a.Options.Timeout = tc.timeout
			if _, err := e.svc.Handle(ctx(t), context.Background(), a, nil); err != nil {
				t.Fatal(err)
			}
			if req := e.helm.reqs[0]; req.Timeout != tc.want {
				t.Errorf("Helm's timeout %s, want %s", req.Timeout, tc.want)
			}
			if got := clock.delays(); len(got) != 1 || got[0] != tc.want {
				t.Errorf("the action ends in %v, want %s", got, tc.want)
			}
		})
	}
}

// afterFuncs is a fake clock that records the delay of every AfterFunc (the action's
// deadline).
type afterFuncs struct {
	*fakekube.Clock
	mu sync.Mutex
	ds []time.Duration
}

func (c *afterFuncs) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.mu.Lock()
	c.ds = append(c.ds, d)
	c.mu.Unlock()
	return c.Clock.AfterFunc(d, f)
}

func (c *afterFuncs) delays() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.ds...)
}
