package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/kelseyhightower/envconfig"
	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/async-helm/async-helm/internal/testcluster"
	"github.com/async-helm/async-helm/pkg/api"
	chartrepos "github.com/async-helm/async-helm/pkg/chart/repos"
	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/submitter"
)

// interop is the executor rig plus submit's use case in-process (so reservations are
// exactly what submit writes) and the helm CLI built from the pinned Helm.
type interop struct {
	*rig
	submit *submitter.Service
	nsIdx  cache.Indexer
	helm   string
	home   string
}

type sentEvents struct {
	mu   sync.Mutex
	last cloudevents.Event
}

func (s *sentEvents) Send(_ context.Context, e cloudevents.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = e
	return nil
}

func newInterop(t *testing.T, cfg Config, helmOpts ...helmexec.FactoryOption) *interop {
	t.Helper()
	helm, err := testcluster.HelmCLI()
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, cfg, helmOpts...)
	charts, err := chartrepos.NewSource(context.Background(), chartsource.Settings{ChartRepositories: "test=" + r.charts.URL, AllowLoopbackCharts: true},
		cluster.Client, time.Hour, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	return &interop{rig: r, nsIdx: idx, helm: helm, home: t.TempDir(),
		submit: &submitter.Service{Store: r.store, Charts: charts, Namespaces: corelisters.NewNamespaceLister(idx)}}
}

// request is what a client sends to submit.
type request struct {
	chart  string // "" for an upgrade that reuses the deployed chart
	values map[string]any
	wait   bool
	atomic bool
	// serverSide and forceConflicts: the apply method (the v4 engine's).
	serverSide     api.ServerSide
	forceConflicts bool
}

// accept runs submit's use case and returns the accepted event it would emit.
func (x *interop) accept(t *testing.T, action release.Action, ns, name string, req request) cloudevents.Event {
	t.Helper()
	_ = x.nsIdx.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	r := api.ReleaseRequest{Name: name, Namespace: ns, Values: req.values, Timeout: "2m", Wait: req.wait, Atomic: req.atomic,
		ServerSide: req.serverSide, ForceConflicts: req.forceConflicts}
	if req.chart != "" {
		r.ChartURL = x.charts.ChartURL(req.chart, "0.1.0")
	}
	sent := &sentEvents{}
	svc := *x.submit
	svc.Sender = sent
	if _, err := svc.Submit(context.Background(), action, r, nil); err != nil {
		t.Fatalf("submit %s %s/%s: %v", action, ns, name, err)
	}
	return sent.last
}

// do submits and delivers: the action has ended when it returns.
func (x *interop) do(t *testing.T, action release.Action, ns, name string, req request) {
	t.Helper()
	if code := x.send(t, x.accept(t, action, ns, name, req)); code != http.StatusOK {
		t.Fatalf("executor answered %d", code)
	}
}

// run runs the helm CLI in ns; it returns the combined output and the exit code.
func (x *interop) run(t *testing.T, ns string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, x.helm, append([]string{"--kubeconfig", cluster.Kubeconfig, "-n", ns}, args...)...)
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+filepath.Join(x.home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(x.home, "cache"), "HELM_DATA_HOME="+filepath.Join(x.home, "data"))
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("helm %v: %v", args, err)
	}
	return string(out), code
}

func (x *interop) helmOK(t *testing.T, ns string, args ...string) string {
	t.Helper()
	out, code := x.run(t, ns, args...)
	if code != 0 {
		t.Fatalf("helm %s: exit %d\n%s", strings.Join(args, " "), code, out)
	}
	return out
}

// history is `helm history -o json`, reduced to what must match between the two.
func (x *interop) history(t *testing.T, ns, name string) string {
	t.Helper()
	out, code := x.run(t, ns, "history", name, "-o", "json")
	if code != 0 {
		return "error: " + firstLine(out)
	}
	var h []struct {
		Revision int    `json:"revision"`
		Status   string `json:"status"`
		Chart    string `json:"chart"`
	}
	if err := json.Unmarshal([]byte(out), &h); err != nil {
		t.Fatalf("helm history: %v\n%s", err, out)
	}
	var b strings.Builder
	for _, r := range h {
		fmt.Fprintf(&b, "%d:%s:%s ", r.Revision, r.Status, r.Chart)
	}
	return strings.TrimSpace(b.String())
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i > 0 {
		s = s[:i]
	}
	return s
}

// resources lists what a chart made in ns (the kinds the test charts use), by kind/name.
func resources(t *testing.T, ns string) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	cms, err := cluster.Client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cms.Items {
		if c.Name != "kube-root-ca.crt" {
			out = append(out, "configmap/"+c.Name)
		}
	}
	deps, err := cluster.Client.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range deps.Items {
		out = append(out, "deployment/"+d.Name)
	}
	jobs, err := cluster.Client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs.Items {
		// Hook Jobs are not part of a release's manifest: helm uninstall leaves them too.
		if j.Annotations["helm.sh/hook"] == "" {
			out = append(out, "job/"+j.Name)
		}
	}
	sort.Strings(out)
	return out
}

// manifestResources are the kind/name pairs of a revision's manifest, as resources names them.
func manifestResources(manifest string) []string {
	var out []string
	for _, doc := range strings.Split(manifest, "\n---") {
		var kind, name string
		for _, line := range strings.Split(doc, "\n") {
			switch {
			case strings.HasPrefix(line, "kind: "):
				kind = strings.ToLower(strings.TrimPrefix(line, "kind: "))
			case strings.HasPrefix(line, "  name: ") && name == "":
				name = strings.TrimPrefix(line, "  name: ")
			}
		}
		if kind != "" && name != "" {
			out = append(out, kind+"/"+name)
		}
	}
	sort.Strings(out)
	return out
}

func TestAtomicUpgradeRollsBackAsHelmDoes(t *testing.T) {
	engines(t, func(t *testing.T, engine helmexec.Engine) {
		x := newInterop(t, Config{HelmEngine: string(engine)})
		ours, theirs := cluster.Namespace(t), cluster.Namespace(t)
		ctx := context.Background()

		x.do(t, release.ActionInstall, ours, "web", request{chart: "tiny", values: map[string]any{"message": "one"}, wait: true})
		x.do(t, release.ActionUpgrade, ours, "web", request{chart: "posthookfail", atomic: true})
		tiny, post := x.charts.ChartURL("tiny", "0.1.0"), x.charts.ChartURL("posthookfail", "0.1.0")
		x.helmOK(t, theirs, "install", "web", tiny, "--set", "message=one", "--wait")
		if out, code := x.run(t, theirs, "upgrade", "web", post, "--atomic", "--timeout", "2m"); code == 0 || !strings.Contains(out, "has been rolled back due to atomic being set") {
			t.Fatalf("helm upgrade --atomic: exit %d\n%s", code, out)
		}

		want := x.history(t, theirs, "web")
		if got := x.history(t, ours, "web"); got != want {
			t.Errorf("history: async-helm %q, helm %q", got, want)
		}
		if want != "1:superseded:tiny-0.1.0 2:failed:posthookfail-0.1.0 3:deployed:tiny-0.1.0" {
			t.Errorf("helm's own history is %q", want)
		}
		for _, ns := range []string{ours, theirs} {
			cm, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, "web-config", metav1.GetOptions{})
			if err != nil || cm.Data["message"] != "one" {
				t.Errorf("%s: web-config after the rollback: %v %v, want message one", ns, cm.Data, err)
			}
			v3, err := x.store.Get(ctx, ns, "web", 3)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := resources(t, ns), manifestResources(v3.Manifest); strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("%s: resources %v, revision 3's manifest names %v", ns, got, want)
			}
		}
	})
}

func TestAtomicInstallUninstallsAsHelmDoes(t *testing.T) {
	engines(t, func(t *testing.T, engine helmexec.Engine) {
		x := newInterop(t, Config{HelmEngine: string(engine)})
		ours, theirs := cluster.Namespace(t), cluster.Namespace(t)
		x.do(t, release.ActionInstall, ours, "web", request{chart: "hookfail", atomic: true})
		if out, code := x.run(t, theirs, "install", "web", x.charts.ChartURL("hookfail", "0.1.0"), "--atomic", "--timeout", "2m"); code == 0 || !strings.Contains(out, "uninstalled due to atomic being set") {
			t.Fatalf("helm install --atomic: exit %d\n%s", code, out)
		}
		for _, ns := range []string{ours, theirs} {
			if out := x.helmOK(t, ns, "list", "-a", "-q"); strings.TrimSpace(out) != "" {
				t.Errorf("%s: helm list -a after a failed atomic install: %q", ns, out)
			}
		}
	})
}

func TestFifteenUpgradesLeaveTenRecords(t *testing.T) {
	engines(t, func(t *testing.T, engine helmexec.Engine) {
		var cfg Config // the executor's defaults, as its environment gives them
		if err := envconfig.Process("", &cfg); err != nil {
			t.Fatal(err)
		}
		cfg.HelmEngine = string(engine)
		x := newInterop(t, cfg)
		ns := cluster.Namespace(t)
		x.do(t, release.ActionInstall, ns, "web", request{chart: "tiny"})
		for i := 0; i < 15; i++ {
			x.do(t, release.ActionUpgrade, ns, "web", request{values: map[string]any{"message": fmt.Sprint(i)}})
		}
		secrets, err := cluster.Client.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "owner=helm,name=web"})
		if err != nil {
			t.Fatal(err)
		}
		var versions []string
		for _, s := range secrets.Items {
			versions = append(versions, s.Labels["version"]+":"+s.Labels["status"])
		}
		sort.Strings(versions)
		t.Logf("%d records after 1 install and 15 upgrades: %v", len(secrets.Items), versions)
		if len(secrets.Items) != 10 {
			t.Fatalf("%d records, want 10", len(secrets.Items))
		}
		if rel := x.get(t, ns, "web", 16); rel.Info.Status != helmrelease.StatusDeployed {
			t.Fatalf("v16 is %s", rel.Info.Status)
		}
	})
}

func TestFailureBeforeAdoptionRecordsTheRevisionItStartedFrom(t *testing.T) {
	engines(t, func(t *testing.T, engine helmexec.Engine) {
		x := newInterop(t, Config{HelmEngine: string(engine)})
		ns := cluster.Namespace(t)
		x.do(t, release.ActionInstall, ns, "web", request{chart: "tiny", values: map[string]any{"message": "one"}})
		x.do(t, release.ActionUpgrade, ns, "web", request{chart: "badtemplate"})
		v1, v2 := x.get(t, ns, "web", 1), x.get(t, ns, "web", 2)
		if v2.Info.Status != helmrelease.StatusFailed || !strings.Contains(v2.Info.Description, "value is required") {
			t.Fatalf("v2: %s %q", v2.Info.Status, v2.Info.Description)
		}
		if v2.Manifest != v1.Manifest || v2.Chart.Metadata.Name != "tiny" || len(v2.Chart.Templates) == 0 ||
			v2.Config["message"] != "one" || v1.Info.Status != helmrelease.StatusDeployed {
			t.Fatalf("v2 does not record v1: manifest %d/%d bytes, chart %s with %d templates, config %v; v1 %s",
				len(v2.Manifest), len(v1.Manifest), v2.Chart.Metadata.Name, len(v2.Chart.Templates), v2.Config, v1.Info.Status)
		}
		sec, err := cluster.Client.CoreV1().Secrets(ns).Get(context.Background(), release.SecretName("web", 2), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := sec.Labels[release.LabelQueued]; ok || sec.Labels[release.LabelChart] != "tiny-0.1.0" {
			t.Errorf("v2 labels %v", sec.Labels)
		}
		// An install that fails before adoption created nothing: its record says so.
		x.do(t, release.ActionInstall, ns, "dep", request{chart: "needsdep"})
		if d := x.get(t, ns, "dep", 1); d.Info.Status != helmrelease.StatusFailed || d.Manifest != "" {
			t.Fatalf("dep v1: %s, manifest %q", d.Info.Status, d.Manifest)
		}
	})
}

func TestChartlessUpgradeRunsTheDeployedChart(t *testing.T) {
	engines(t, func(t *testing.T, engine helmexec.Engine) {
		x := newInterop(t, Config{HelmEngine: string(engine)})
		ns := cluster.Namespace(t)
		x.do(t, release.ActionInstall, ns, "web", request{chart: "tiny", values: map[string]any{"message": "one"}})
		x.do(t, release.ActionUpgrade, ns, "web", request{chart: "hookfail"}) // v2 failed after adoption, chart hookfail
		if st := x.get(t, ns, "web", 2).Info.Status; st != helmrelease.StatusFailed {
			t.Fatalf("v2 is %s", st)
		}
		e := x.accept(t, release.ActionUpgrade, ns, "web", request{values: map[string]any{"message": "three"}})
		a, err := events.ParseAccepted(e)
		if err != nil {
			t.Fatal(err)
		}
		v1 := x.get(t, ns, "web", 1)
		if want, _ := release.ChartDigest(v1.Chart); a.ChartDigest != want {
			t.Errorf("event's chart digest %s, want the deployed v1's %s", a.ChartDigest, want)
		}
		if code := x.send(t, e); code != http.StatusOK {
			t.Fatalf("deliver: %d", code)
		}
		v3 := x.get(t, ns, "web", 3)
		if v3.Info.Status != helmrelease.StatusDeployed || v3.Chart.Metadata.Name != "tiny" || v3.Labels[release.LabelChart] != "tiny-0.1.0" {
			t.Fatalf("v3: %s, chart %s, labels %v", v3.Info.Status, v3.Chart.Metadata.Name, v3.Labels)
		}
	})
}

func TestTheExecutorRunsOnlyTheChartSubmitValidated(t *testing.T) {
	engines(t, func(t *testing.T, engine helmexec.Engine) {
		x := newInterop(t, Config{HelmEngine: string(engine)})
		ns := cluster.Namespace(t)
		x.do(t, release.ActionInstall, ns, "web", request{chart: "tiny"})
		for i, reuse := range []bool{false, true} {
			req := request{chart: "tiny"}
			if reuse {
				req.chart = ""
			}
			e := x.accept(t, release.ActionUpgrade, ns, "web", req)
			a, err := events.ParseAccepted(e)
			if err != nil {
				t.Fatal(err)
			}
			if a.ChartDigest == "" {
				t.Fatal("the accepted event carries no chart digest")
			}
			a.ChartDigest = "sha256:0000" // another chart than the one validated
			if code := x.deliver(t, a); code != http.StatusOK {
				t.Fatalf("deliver: %d", code)
			}
			rel := x.get(t, ns, "web", 2+i)
			if rel.Info.Status != helmrelease.StatusFailed || !strings.Contains(rel.Info.Description, "the chart changed since the request was accepted") {
				t.Errorf("reuse=%v: %s %q", reuse, rel.Info.Status, rel.Info.Description)
			}
		}
	})
}
