package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/internal/testcharts"
	"github.com/async-helm/async-helm/internal/testcluster"
	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/kube"
	"github.com/async-helm/async-helm/pkg/release"
)

var cluster *testcluster.Env

func TestMain(m *testing.M) {
	// The interop matrices' cells wait on slow pods and Helm's --wait for most of their
	// time: the two matrices run side by side, their eight 60 s cells at once.
	if err := testcluster.WaitBoundParallel(matrixActions); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cluster = testcluster.MustStart()
	os.Exit(m.Run())
}

// rig is an executor on loopback plus what submit would do: reserve and send.
type rig struct {
	url      string
	charts   *testcharts.Server
	store    *release.Store
	shutdown context.CancelFunc
	fn       *Function
}

func newRig(t *testing.T, cfg Config, helmOpts ...helmexec.FactoryOption) *rig {
	t.Helper()
	charts := testcharts.Start(t)
	cl, err := kube.Open(cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Kubeconfig = cluster.Kubeconfig
	if cfg.HelmEngine == "" {
		cfg.HelmEngine = defaultTestEngine()
	}
	cfg.ChartRepositories = "test=" + charts.URL
	cfg.AllowLoopbackCharts = true
	if cfg.MaxParallel == 0 {
		cfg.MaxParallel = 4
	}
	if cfg.MaxActionTime == 0 {
		cfg.MaxActionTime = 10 * time.Minute
	}
	if cfg.LeaseDuration == 0 {
		cfg.LeaseDuration = 15 * time.Second
	}
	if cfg.Namespace == "" { // async-helm's own namespace: a fresh one per rig
		cfg.Namespace = cluster.Namespace(t)
	}
	shutdown, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := New(cfg, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Sugar(), shutdown, nil)
	f.helmOpts = helmOpts
	if err := f.Start(shutdown); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(f.Handler())
	t.Cleanup(srv.Close)
	// The store seals as submit's does, with the key the executor checks seals by.
	store := &release.Store{Client: cl.Typed, Metadata: cl.Metadata, SealKey: []byte(cfg.EventSigningKey)}
	return &rig{url: srv.URL, charts: charts, store: store, shutdown: cancel, fn: f}
}

// reserve does submit's part: the pending revision and its event payload.
func (r *rig) reserve(t *testing.T, action release.Action, ns, name string, ref chartsource.Ref, values map[string]any, opts events.Options) events.Action {
	t.Helper()
	rev, err := r.store.NextRevision(context.Background(), ns, name, action)
	if err != nil {
		t.Fatal(err)
	}
	id := name + "-req-" + time.Now().Format("150405.000000")
	meta := reservedChart(ref)
	sec, err := r.store.Reserve(context.Background(), release.Reservation{Namespace: ns, Name: name, Action: action,
		Revision: rev, Chart: meta, Values: values, RequestID: id})
	if err != nil {
		t.Fatal(err)
	}
	if opts.Timeout == 0 {
		opts.Timeout = 2 * time.Minute
	}
	return events.Action{Action: action, Namespace: ns, Name: name, Revision: rev, SecretName: sec.Name,
		Chart: ref, Values: values, ReuseChart: ref == (chartsource.Ref{}), Options: opts, RequestID: id}
}

// deliver sends the accepted event and returns the executor's HTTP status.
func (r *rig) deliver(t *testing.T, a events.Action) int {
	t.Helper()
	e, err := events.NewAccepted(a)
	if err != nil {
		t.Fatal(err)
	}
	return r.send(t, e)
}

func (r *rig) send(t *testing.T, e cloudevents.Event) int {
	t.Helper()
	c, err := cloudevents.NewClientHTTP(cehttp.WithClient(http.Client{Timeout: 15 * time.Minute}))
	if err != nil {
		t.Fatal(err)
	}
	res := c.Send(cloudevents.ContextWithTarget(context.Background(), r.url), e)
	var httpRes *cehttp.Result
	if !cloudevents.ResultAs(res, &httpRes) {
		t.Fatalf("send: %v", res)
	}
	return httpRes.StatusCode
}

func (r *rig) get(t *testing.T, ns, name string, rev int) *helmrelease.Release {
	t.Helper()
	rel, err := r.store.Get(context.Background(), ns, name, rev)
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

func waitStatus(t *testing.T, r *rig, ns, name string, rev int, timeout time.Duration, want helmrelease.Status) *helmrelease.Release {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		rel, err := r.store.Get(context.Background(), ns, name, rev)
		if err == nil && rel.Info.Status == want {
			return rel
		}
		if time.Now().After(deadline) {
			status := "missing"
			if rel != nil {
				status = rel.Info.Status.String()
			}
			t.Fatalf("%s/%s v%d is %s after %s, want %s", ns, name, rev, status, timeout, want)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// reservedChart is the metadata submit reserves for ref: the chart's own (the test charts'
// archives are named <chart>-<version>.tgz), tiny 0.1.0 for a reused chart.
func reservedChart(ref chartsource.Ref) *chart.Metadata {
	base := path.Base(ref.URL)
	if name, version, ok := release.ParseChartLabel(strings.TrimSuffix(base, ".tgz")); ok && strings.HasSuffix(base, ".tgz") {
		return &chart.Metadata{Name: name, Version: version}
	}
	return &chart.Metadata{Name: "tiny", Version: "0.1.0"}
}
