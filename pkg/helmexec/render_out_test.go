package helmexec

import (
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	helmrelease "helm.sh/helm/v3/pkg/release"
	helmtime "helm.sh/helm/v3/pkg/time"
	"k8s.io/client-go/rest"

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

// An install and an upgrade rendered in a worker write the records Helm writes when it
// renders in process, for the charts of testdata (GitLab 6.5.4 too): the same manifest,
// hooks, notes, values and chart, failures too.
func TestRecordsRenderedInAWorkerAreHelms(t *testing.T) {
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
			inProc, memIn, optsIn := offlineOn(t)
			out, memOut, optsOut := offlineOn(t, WithRenderWorkers(pool))
			for rev := 1; rev <= 2; rev++ {
				req := Request{Namespace: "ns", Name: "web", Revision: rev, Chart: c.chart(t), Values: c.values, Description: "by test"}
				run := (*Factory).Install
				if rev == 2 {
					run = (*Factory).Upgrade
				}
				status := helmrelease.StatusPendingInstall
				if rev == 2 {
					status = helmrelease.StatusPendingUpgrade
				}
				reserve(t, memIn, "web", rev, status)
				reserve(t, memOut, "web", rev, status)
				_, errIn := run(inProc, ctx(t), req, optsIn...)
				req.Chart = c.chart(t)
				_, errOut := run(out, ctx(t), req, optsOut...)
				if (errIn == nil) != (errOut == nil) {
					t.Fatalf("revision %d: in process %v, in a worker %v", rev, errIn, errOut)
				}
				if errIn != nil {
					t.Logf("revision %d failed: in process %v; in a worker %v", rev, errIn, errOut)
					return
				}
				a, b := comparable(t, get(t, memIn, "web", rev)), comparable(t, get(t, memOut, "web", rev))
				if c.random != nil {
					a, b = c.random.ReplaceAllString(a, "RANDOM"), c.random.ReplaceAllString(b, "RANDOM")
				}
				if a != b {
					i := 0
					for i < len(a) && i < len(b) && a[i] == b[i] {
						i++
					}
					from := max(i-300, 0)
					t.Fatalf("revision %d's records differ at byte %d:\nin process ...%.600s\nin a worker ...%.600s", rev, i, a[from:], b[from:])
				}
			}
		})
	}
}

// A template that builds a 400 MiB string fails the install with the memory reason, and
// this process never holds the string.
func TestInstallOfATemplateOverItsMemory(t *testing.T) {
	pool := &RenderPool{Limits: RenderLimits{MaxMemoryBytes: 128 << 20}}
	t.Cleanup(pool.Close)
	f, mem, opts := offlineOn(t, WithRenderWorkers(pool))
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
