package executor

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"k8s.io/client-go/rest"

	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

// endless is a chart whose template renders for seconds (a real attack loops for ever).
func endless(t *testing.T) *chart.Chart {
	t.Helper()
	return &chart.Chart{Metadata: &chart.Metadata{Name: "tiny", Version: "1.0.0", APIVersion: "v2"},
		Templates: []*chart.File{{Name: "templates/loop.yaml",
			Data: []byte(`{{ range until 2000 }}{{ range until 6000 }}{{ end }}{{ end }}`)}}}
}

// withRealHelm runs Helm's SDK offline: the release records in the fake cluster's Secrets,
// manifests applied by kubefake.
func withRealHelm(t *testing.T, e *env) {
	t.Helper()
	f, err := helmexec.NewFactory(&rest.Config{Host: "http://127.0.0.1:1"}) // never dialled
	if err != nil {
		t.Fatal(err)
	}
	e.svc.Helm = f
	e.svc.HelmOptions = []helmexec.Option{helmexec.WithDriver(storage.NewSecrets(e.c.CoreV1().Secrets("ns"))),
		helmexec.WithCapabilities(chartutil.DefaultCapabilities), helmexec.WithKubeClient(&kubefake.PrintingKubeClient{Out: io.Discard})}
}

// A template that does not finish rendering fails its action at RENDER_TIMEOUT: the
// revision is failed with the reason, the slot and the Lease are free at once, and nothing
// of the render goes on (its worker was killed).
func TestEndlessTemplateIsFailedAtTheRenderBound(t *testing.T) {
	e := newEnv(t, 1)
	withRealHelm(t, e)
	e.svc.Charts = charts{repackage(t, nil, endless(t))}
	e.svc.RenderTimeout = 100 * time.Millisecond
	a := e.reserve("web", "req-1")
	start := time.Now()
	got, err := e.svc.Handle(ctx(t), context.Background(), a, nil)
	if err != nil || got != OutcomeFailed {
		t.Fatalf("Handle = %s, %v after %s; want failed at the bound", got, err, time.Since(start))
	}
	if st, desc := e.status("web"); st != helmrelease.StatusFailed || !strings.Contains(desc, "rendering took more than 100ms of CPU") {
		t.Errorf("revision %s %q", st, desc)
	}
	if e.leaseExists("web") || !e.svc.Drained() {
		t.Errorf("lease left %v, slot free %v", e.leaseExists("web"), e.svc.Drained())
	}
	if n := e.svc.Orphans.Count(); n != 0 {
		t.Fatalf("%d orphans, want none: the render was its worker's", n)
	}
}
