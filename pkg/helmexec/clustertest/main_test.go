package clustertest

import (
	"context"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/async-helm/async-helm/internal/testcluster"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/release"
)

var cluster *testcluster.Env

func TestMain(m *testing.M) {
	cluster = testcluster.MustStart()
	os.Exit(m.Run())
}

// requestLog counts the requests a factory's clients send, by kind.
type requestLog struct {
	mu        sync.Mutex
	discovery []string // /api, /apis, /api/v1, /apis/<group>/<version>, /version
	openapi   []string // /openapi/...
	other     int
}

// config is the admin's config with every request of every client built from it counted.
func (l *requestLog) config() *rest.Config {
	cfg := rest.CopyConfig(cluster.Admin)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			l.record(r.URL.Path)
			return rt.RoundTrip(r)
		})
	})
	return cfg
}

func (l *requestLog) record(path string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case parts[0] == "openapi":
		l.openapi = append(l.openapi, path)
	case path == "/version",
		parts[0] == "api" && len(parts) <= 2,
		parts[0] == "apis" && len(parts) <= 3:
		l.discovery = append(l.discovery, path)
	default:
		l.other++
	}
}

// counts are the discovery and OpenAPI requests so far, and the others.
func (l *requestLog) counts() (discovery, openapi []string, other int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.discovery...), append([]string(nil), l.openapi...), l.other
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// tinyChart is testdata/charts/tiny: a ConfigMap, a Deployment and a Job.
func tinyChart(t testing.TB) *chart.Chart {
	t.Helper()
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ch, err := loader.Load(root + "/testdata/charts/tiny")
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// install runs a plain Helm install through the factory's configuration (no wait).
func install(t testing.TB, f *helmexec.Factory, ns, name string, ch *chart.Chart, opts ...helmexec.Option) error {
	t.Helper()
	cfg, err := f.Configuration(ns, opts...)
	if err != nil {
		t.Fatal(err)
	}
	i := action.NewInstall(cfg)
	i.ReleaseName, i.Namespace = name, ns
	_, err = i.Run(ch, nil)
	return err
}

// installReserved reserves revision 1 as submit does and runs the factory's install of it
// (the engine's own path, no wait).
func installReserved(t testing.TB, f *helmexec.Factory, ns, name string, ch *chart.Chart, opts ...helmexec.Option) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	store := &release.Store{Client: cluster.Client}
	if _, err := store.Reserve(ctx, release.Reservation{Namespace: ns, Name: name, Action: release.ActionInstall,
		Revision: 1, Chart: ch.Metadata, RequestID: name}); err != nil {
		t.Fatal(err)
	}
	_, err := f.Install(ctx, helmexec.Request{Namespace: ns, Name: name, Revision: 1, Chart: ch, Timeout: time.Minute,
		Labels: release.Labels(name, 1, ch.Metadata.Name, ch.Metadata.Version)}, opts...)
	return err
}

func convert(obj map[string]any, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(obj, into)
}

func unstructuredInt(obj map[string]any, fields ...string) (int64, bool, error) {
	return unstructured.NestedInt64(obj, fields...)
}
