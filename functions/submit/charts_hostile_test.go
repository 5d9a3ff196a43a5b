package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/async-helm/async-helm/internal/testcharts/hostile"
	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/helmexec"
)

func serveArchive(t *testing.T, archive []byte) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(archive) }))
	t.Cleanup(srv.Close)
	return srv.URL + "/chart-0.1.0.tgz"
}

// callWithin is call with a bound: a route that never answers fails the test, not the run.
func (s *stack) callWithin(t *testing.T, within time.Duration, method, path string, body any) (int, api.Error, http.Header) {
	t.Helper()
	raw, _ := json.Marshal(body)
	req, err := http.NewRequest(method, s.url+path, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := (&http.Client{Timeout: within}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: no answer within %s: %v", method, path, within, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	var e api.Error
	_ = json.Unmarshal(out, &e)
	return resp.StatusCode, e, resp.Header
}

// A few KiB of chart whose nested archives unpack to 288 MiB get 422 naming the bound on
// every route that loads a chart, nothing is reserved, and submit allocates a few MiB for
// all of it (Helm's loader alone allocated 577 MiB per load).
func TestChartBombIsRefusedOnEveryRoute(t *testing.T) {
	s := newStack(t)
	ns := cluster.Namespace(t)
	u := serveArchive(t, hostile.Bomb(t, 3, 96<<20))
	req := api.ReleaseRequest{Name: "bomb", Namespace: ns, ChartURL: u}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{http.MethodPost, api.PathAsync, req},
		{http.MethodGet, api.PathChart + "?url=" + url.QueryEscape(u), nil},
		{http.MethodPost, api.PathTemplate, req},
	} {
		code, e, _ := s.callWithin(t, time.Minute, c.method, c.path, c.body)
		if code != http.StatusUnprocessableEntity || !strings.Contains(e.Error, "chart unpacks to more than 64 MiB across its nested archives") {
			t.Errorf("%s %s of the bomb: %d %q, want 422 naming the bound", c.method, c.path, code, e.Error)
		}
	}
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("three routes on the bomb allocated %d MiB", allocated>>20)
	if allocated > 64<<20 {
		t.Errorf("the bomb made submit allocate %d MiB, want a few", allocated>>20)
	}
	if n := releaseSecrets(t, ns); n != 0 {
		t.Errorf("%d release secrets after the bomb", n)
	}
	// Within the budget but too large to build as JSON for the chart route.
	big := serveArchive(t, hostile.Bomb(t, 1, 20<<20))
	code, e, _ := s.callWithin(t, time.Minute, http.MethodGet, api.PathChart+"?url="+url.QueryEscape(big), nil)
	if code != http.StatusUnprocessableEntity || !strings.Contains(e.Error, "too large to answer") {
		t.Errorf("chart route of a 20 MiB chart: %d %q, want 422", code, e.Error)
	}
}

// A template that loops (almost) forever gets 422 once the render bound passes, and the
// render child, which burned a core, is gone: nothing goes on after the answer.
func TestEndlessTemplateIsStoppedAtTheRenderBound(t *testing.T) {
	s := newStackWith(t, func(c *Config) { c.TemplateRenderTimeout = 2 * time.Second })
	ns := cluster.Namespace(t)
	u := serveArchive(t, hostile.Endless(t))
	start := time.Now()
	code, e, _ := s.callWithin(t, 20*time.Second, http.MethodPost, api.PathTemplate, api.ReleaseRequest{Name: "endless", Namespace: ns, ChartURL: u})
	took := time.Since(start)
	t.Logf("endless template: %d after %s: %s", code, took.Round(time.Millisecond), e.Error)
	if code != http.StatusUnprocessableEntity || !strings.Contains(e.Error, "did not render in time") {
		t.Errorf("endless template: %d %q, want 422 saying it did not render in time", code, e.Error)
	}
	if kids := renderChildren(t); len(kids) != 0 {
		t.Errorf("render children still running after the answer: %v", kids)
	}
	// A chart that renders still does, through the same children.
	code, e, _ = s.callWithin(t, 20*time.Second, http.MethodPost, api.PathTemplate, s.install("ok", ns))
	if code != http.StatusOK {
		t.Errorf("template of tiny: %d %q", code, e.Error)
	}
}

// renderChildren lists the pids of this process's children that run as render children.
func renderChildren(t *testing.T) []int {
	t.Helper()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, p := range stats {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces, the fields after ")" do not.
		fields := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
		if bytes.Contains(cmdline, []byte(helmexec.RenderChildArg)) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			out = append(out, pid)
		}
	}
	return out
}

// The chart and template routes, which any valid token may call, take a token of the
// caller's own bucket: past its burst a caller gets 429 with Retry-After, another caller
// does not.
func TestChartRoutesAreLimitedPerCaller(t *testing.T) {
	if cluster.Dev.BearerToken == "" {
		t.Skip("the kubeconfig has no dev token (not the local cluster)")
	}
	s := newStackWith(t, func(c *Config) { c.ChartRoutesRate, c.ChartRoutesBurst = 0.01, 2 })
	chart := api.PathChart + "?url=" + url.QueryEscape(s.charts.ChartURL("tiny", "0.1.0"))
	for i := 0; i < 2; i++ {
		if code, e, _ := s.callWithin(t, time.Minute, http.MethodGet, chart, nil); code != http.StatusOK {
			t.Fatalf("call %d within the burst: %d %q", i+1, code, e.Error)
		}
	}
	code, e, h := s.callWithin(t, time.Minute, http.MethodGet, chart, nil)
	if retry, _ := strconv.Atoi(h.Get("Retry-After")); code != http.StatusTooManyRequests || retry < 1 {
		t.Errorf("past the burst: %d %q Retry-After %q, want 429 with Retry-After", code, e.Error, h.Get("Retry-After"))
	}
	ns := cluster.Namespace(t)
	if code, _, _ := s.callWithin(t, time.Minute, http.MethodPost, api.PathTemplate, s.install("x", ns)); code != http.StatusTooManyRequests {
		t.Errorf("template past the burst: %d, want 429", code)
	}
	s.token = cluster.Dev.BearerToken
	if code, e, _ := s.callWithin(t, time.Minute, http.MethodGet, chart, nil); code != http.StatusOK {
		t.Errorf("another caller: %d %q, want 200 (a bucket of its own)", code, e.Error)
	}
	long := api.PathChart + "?url=" + url.QueryEscape(s.charts.ChartURL("tiny", "0.1.0")+"?"+strings.Repeat("a", 3000))
	if code, _, _ := s.callWithin(t, time.Minute, http.MethodGet, long, nil); code != http.StatusBadRequest {
		t.Errorf("a 3 KB url: %d, want 400", code)
	}
}
