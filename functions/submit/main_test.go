package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/async-helm/async-helm/internal/testcharts"
	"github.com/async-helm/async-helm/internal/testcluster"
	"github.com/async-helm/async-helm/internal/testsink"
	"github.com/async-helm/async-helm/pkg/api"
	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/events"
)

var cluster *testcluster.Env

func TestMain(m *testing.M) {
	cluster = testcluster.MustStart()
	os.Exit(m.Run())
}

// stack is submit on loopback with a recording sink and a chart repository.
type stack struct {
	url string
	// token is sent as the bearer token (the operator's, a ServiceAccount bound to cluster-admin, unless a test changes it).
	token  string
	sink   *testsink.Sink
	charts *testcharts.Server
}

func newStack(t *testing.T) *stack { return newStackWith(t, nil) }

// newStackWith lets a test change the configuration before submit starts.
func newStackWith(t *testing.T, change func(*Config)) *stack {
	t.Helper()
	sink := testsink.Start(t)
	charts := testcharts.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cfg := Config{
		SinkConfig: events.SinkConfig{Sink: sink.URL},
		Kubeconfig: cluster.Kubeconfig,
		// The test chart repository is on loopback.
		Settings:       chartsource.Settings{ChartRepositories: "test=" + charts.URL, AllowLoopbackCharts: true},
		ChartCacheTTL:  time.Hour,
		Authentication: true,
	}
	if change != nil {
		change(&cfg)
	}
	f := New(cfg, zap.NewNop().Sugar(), nil)
	if err := f.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(f.Handler())
	t.Cleanup(srv.Close)
	return &stack{url: srv.URL, sink: sink, charts: charts, token: cluster.Operator.BearerToken}
}

// call sends a JSON body and decodes the JSON answer into out (if not nil).
func (s *stack) call(t *testing.T, method, path string, body any, out any) (int, http.Header) {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		r = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, s.url+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, raw, err)
		}
	}
	return resp.StatusCode, resp.Header
}

func (s *stack) install(name, ns string) api.ReleaseRequest {
	return api.ReleaseRequest{Name: name, Namespace: ns, ChartURL: s.charts.ChartURL("tiny", "0.1.0"),
		Values: map[string]any{"message": "hi"}}
}
