package executor

import (
	"context"
	"sync"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/internal/testwait"
	chartref "github.com/async-helm/async-helm/pkg/chart/ref"
	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/fairqueue"
	"github.com/async-helm/async-helm/pkg/helmexec"
)

// stallingCharts serves the chart of one URL only when released: a tenant's chart server
// that trickles its bytes (up to the download's own bound, a minute, per request).
type stallingCharts struct {
	charts
	url     string
	fetched chan struct{}
	release chan struct{}
}

func (c stallingCharts) Get(ctx context.Context, ref chartref.Ref) (*chartsource.Chart, error) {
	if ref.URL == c.url {
		c.fetched <- struct{}{}
		select {
		case <-c.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return c.charts.Get(ctx, ref)
}

// A chart download is network I/O on a server the caller chose: it must not hold one of the
// few CPU slots. With one CPU slot, an install whose chart server stalls does not keep
// another tenant's install from running Helm.
func TestStalledChartDownloadHoldsNoCPUSlot(t *testing.T) {
	e := newEnv(t, 4)
	e.svc.cpu = fairqueue.New(1, fairqueue.Options{})
	slow := stallingCharts{charts: charts{packaged(t)}, url: "https://tenant.example/slow-1.0.0.tgz",
		fetched: make(chan struct{}, 1), release: make(chan struct{})}
	e.svc.Charts = slow
	var once sync.Once
	unstall := func() { once.Do(func() { close(slow.release) }) }
	t.Cleanup(unstall)
	e.helm.run = func(ctx context.Context, req helmexec.Request) (*helmrelease.Release, error) {
		return e.writes(ctx, req)
	}
	a := e.reserve("slow", "r1")
	a.Chart.URL = slow.url
	first := make(chan Outcome, 1)
	go func() { o, _ := e.svc.Handle(ctx(t), context.Background(), a, nil); first <- o }()
	<-slow.fetched
	done := make(chan Outcome, 1)
	go func() { o, _ := e.svc.Handle(ctx(t), context.Background(), e.reserve("other", "r2"), nil); done <- o }()
	testwait.For(t, func() bool { return e.helm.calls.Load() >= 1 })
	if o := <-done; o != OutcomeDeployed {
		t.Errorf("the other tenant's install: %s", o)
	}
	unstall()
	if o := <-first; o != OutcomeDeployed {
		t.Errorf("the slow chart's install: %s", o)
	}
	if e.svc.cpu.InUse() != 0 {
		t.Errorf("%d CPU slots left taken", e.svc.cpu.InUse())
	}
}
