package executor

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/internal/testwait"
	chartref "github.com/async-helm/async-helm/pkg/chart/ref"
	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/fairqueue"
	"github.com/async-helm/async-helm/pkg/helmexec"
)

// sizedChart is the tiny chart with 8 MiB of zeros in files/ (a few KiB of archive), fetched
// through a Source, which measures what it unpacks to (Chart.Size).
func sizedChart(t *testing.T) *chartsource.Chart {
	t.Helper()
	ch := &chart.Chart{Metadata: &chart.Metadata{Name: "tiny", Version: "1.0.0", APIVersion: "v2"},
		Templates: []*chart.File{{Name: "templates/cm.yaml", Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")}},
		Files:     []*chart.File{{Name: "files/a", Data: make([]byte, 4<<20)}, {Name: "files/b", Data: make([]byte, 4<<20)}}}
	path, err := chartutil.Save(ch, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	archive, err := os.ReadFile(filepath.Clean(path))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(archive) }))
	t.Cleanup(srv.Close)
	src := &chartsource.Source{HTTP: chartsource.Policy{AllowLoopback: true}.HTTPClient(time.Minute)}
	c, err := src.Get(ctx(t), chartref.Ref{URL: srv.URL + "/tiny-1.0.0.tgz", Namespace: "a"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("archive %d KiB, held loaded %d MiB", len(archive)>>10, c.Size()>>20)
	return c
}

// Each action holds Helm's loaded copy of its chart for its whole life, waits included (a
// 56 KiB archive held 56 MiB per action, the 64 action slots bounding nothing of it). With
// chart memory for four such charts, a tenant's two installs do not hold two at once: the
// second waits for the first's to be given back, its action slot lent, so that another
// tenant's install runs on it; it keeps the archive only, not the source's parsed copy. Without
// the bound both of A's copies were held at once.
func TestActionsHoldTheirChartsWithinTheExecutorsChartMemory(t *testing.T) {
	e := newEnv(t, 2)
	e.svc.cpu = fairqueue.New(2, fairqueue.Options{Lending: true})
	c := sizedChart(t)
	e.svc.SlotWait = time.Hour // the fake clock never gets there: A's second waits for memory
	e.svc.chartMem = fairqueue.NewBytes(4 * c.Size())
	var inHelm, got, dropped atomic.Int32
	release := make(chan struct{})
	e.helm.run = func(ctx context.Context, req helmexec.Request) (*helmrelease.Release, error) {
		if req.Namespace == "a" {
			inHelm.Add(1)
			<-release // holding its chart, its action slot and a CPU slot
			defer inHelm.Add(-1)
		}
		return e.writes(ctx, req)
	}
	e.svc.Charts = countingCharts{charts{c}, &got, &dropped}
	outcomes := make(chan Outcome, 2)
	for i, name := range []string{"one", "two"} {
		a := e.reserveAs("a", "alice", name, "a-"+name)
		go func() { o, _ := e.svc.Handle(ctx(t), context.Background(), a, nil); outcomes <- o }()
		testwait.For(t, func() bool { return got.Load() == int32(i+1) })
	}
	testwait.For(t, func() bool { return inHelm.Load() >= 1 })
	if o, err := e.svc.Handle(ctx(t), context.Background(), e.reserveAs("b", "bob", "web", "b-1"), nil); o != OutcomeDeployed {
		t.Fatalf("B's install while A's wait: %s, %v", o, err)
	}
	if n := inHelm.Load(); n != 1 {
		t.Errorf("%d of A's installs hold their %d MiB charts in Helm at once; A's share of the chart memory is one", n, c.Size()>>20)
	}
	// Neither keeps the source's parsed copy: the one waiting for memory holds the archive only.
	testwait.For(t, func() bool { runtime.GC(); return dropped.Load() == 3 }) // A's two and B's
	close(release)
	for range 2 {
		if o := <-outcomes; o != OutcomeDeployed {
			t.Errorf("A's install: %s", o)
		}
	}
	if n := e.svc.chartMem.Used(); n != 0 {
		t.Errorf("%d bytes of chart memory held once every action ended", n)
	}
}

// countingCharts counts the charts got, each with a parsed copy of its own (as the cache's,
// once it evicted them) whose collections it counts in dropped.
type countingCharts struct {
	charts
	got, dropped *atomic.Int32
}

func (c countingCharts) Get(ctx context.Context, ref chartref.Ref) (*chartsource.Chart, error) {
	defer c.got.Add(1)
	got, err := c.charts.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	cp := *got
	cp.Loaded = &chart.Chart{Metadata: got.Loaded.Metadata}
	runtime.SetFinalizer(cp.Loaded, func(*chart.Chart) { c.dropped.Add(1) })
	return &cp, nil
}
