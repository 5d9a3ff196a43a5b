package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/async-helm/async-helm/internal/testcluster"
	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/reader"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/lease"
)

// interopV4 is the interop rig with the helm v4 CLI beside the v3 one: async-helm (Helm v3
// in-process), the helm v3 CLI writing the twins (x.helm), the helm v4 CLI (v4.helm), and
// submit's read side wired as submit wires it.
type interopV4 struct {
	*interop
	v4   *interop
	read *reader.Service
}

func newInteropV4(t *testing.T, engine helmexec.Engine) *interopV4 {
	t.Helper()
	helm4, err := testcluster.HelmV4CLI()
	if err != nil {
		t.Fatal(err)
	}
	x := newInterop(t, Config{HelmEngine: string(engine), MaxParallel: matrixActions})
	x.submit.Heartbeat = &lease.Heartbeat{Client: cluster.Client, Holder: "submit", Duration: time.Hour}
	v4 := *x
	v4.helm, v4.home = helm4, t.TempDir()
	f, err := helmexec.NewFactory(cluster.Admin)
	if err != nil {
		t.Fatal(err)
	}
	return &interopV4{interop: x, v4: &v4, read: &reader.Service{Helm: f, Progress: x.store, Secrets: x.store, Index: x.store}}
}

// rollback and uninstall run submit's use case and deliver its event: the action has ended.
func (x *interopV4) rollback(t *testing.T, ns string, to int) {
	t.Helper()
	x.rollbackAs(t, ns, to, api.ServerSideDefault)
}

// rollbackAs is rollback with an apply method.
func (x *interopV4) rollbackAs(t *testing.T, ns string, to int, serverSide api.ServerSide) {
	t.Helper()
	sent := &sentEvents{}
	svc := *x.submit
	svc.Sender = sent
	req := api.RollbackRequest{Namespace: ns, Name: "web", Version: to, Timeout: "2m", ServerSide: serverSide}
	if _, err := svc.Rollback(context.Background(), req, nil); err != nil {
		t.Fatalf("rollback %s/web: %v", ns, err)
	}
	if code := x.send(t, sent.last); code != http.StatusOK {
		t.Fatalf("executor answered %d", code)
	}
}

func (x *interopV4) uninstall(t *testing.T, ns string) {
	t.Helper()
	sent := &sentEvents{}
	svc := *x.submit
	svc.Sender = sent
	if _, err := svc.Uninstall(context.Background(), ns, "web", "", nil); err != nil {
		t.Fatalf("uninstall %s/web: %v", ns, err)
	}
	if code := x.send(t, sent.last); code != http.StatusOK {
		t.Fatalf("executor answered %d", code)
	}
}

// listed is what submit's read side shows of ns: the list, with and without limitInfo,
// and the history, as name status revision chart.
func (x *interopV4) listed(t *testing.T, ns string) string {
	t.Helper()
	ctx := context.Background()
	full, err := x.read.List(ctx, nil, ns, false)
	if err != nil {
		return "error: " + err.Error()
	}
	limited, err := x.read.List(ctx, nil, ns, true)
	if err != nil {
		return "error: " + err.Error()
	}
	hist, err := x.read.History(ctx, nil, ns, "web")
	if err != nil {
		return "error: " + err.Error()
	}
	var b []string
	for _, r := range full.([]api.Release) {
		b = append(b, fmt.Sprintf("%s %s v%d %s-%s", r.Name, r.Info.Status, r.Version, r.Chart.Metadata.Name, r.Chart.Metadata.Version))
	}
	for _, r := range limited.([]api.ReleaseInfo) {
		b = append(b, fmt.Sprintf("limitInfo: %s %s v%d %s-%s", r.Name, r.Info.Status, r.Version, r.Chart.Metadata.Name, r.Chart.Metadata.Version))
	}
	var h []string
	for _, r := range hist {
		h = append(h, fmt.Sprintf("%d:%s", r.Version, r.Info.Status))
	}
	return strings.Join(b, "; ") + "; history " + strings.Join(h, " ")
}

// applied is what is in ns after an action: the history (read by helm v4), the message
// the chart's ConfigMap holds and the resources.
func (x *interopV4) applied(t *testing.T, ns string) string {
	t.Helper()
	msg := "-"
	if cm, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "web-config", metav1.GetOptions{}); err == nil {
		msg = cm.Data["message"]
	}
	return fmt.Sprintf("%s; message %s; %v", x.v4.history(t, ns, "web"), msg, resources(t, ns))
}

// applyMethods is the apply_method (Helm v4's field) of every record of release web,
// "-" where there is none, as revision:method.
func applyMethods(t *testing.T, ns string) string {
	t.Helper()
	secrets, err := cluster.Client.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "owner=helm,name=web"})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range secrets.Items {
		var r struct {
			Version     int    `json:"version"`
			ApplyMethod string `json:"apply_method"`
		}
		if err := release.DecodeInto(s.Data["release"], &r); err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		if r.ApplyMethod == "" {
			r.ApplyMethod = "-"
		}
		out = append(out, fmt.Sprintf("%d:%s", r.Version, r.ApplyMethod))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// managers are the field managers of the chart's ConfigMap, as manager/operation.
func managers(t *testing.T, ns string) string {
	t.Helper()
	cm, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "web-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range cm.ManagedFields {
		out = append(out, m.Manager+"/"+string(m.Operation))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// A release installed by helm v3, by helm v4 with server-side apply (its default) and by
// helm v4 with client-side apply (as the console installs), then listed, upgraded, rolled
// back, cancelled and uninstalled through async-helm on each engine, with a helm v4 upgrade in between:
// each step must show the same on the three, the v3 one being the release async-helm was
// built for.
func TestHelmV4ReleasesWorkThroughAsyncHelm(t *testing.T) {
	engines(t, func(t *testing.T, engine helmexec.Engine) {
		x := newInteropV4(t, engine)
		tiny := x.charts.ChartURL("tiny", "0.1.0")
		writers := []struct {
			name    string
			install func(t *testing.T, ns string)
			method  string // revision 1's apply_method ("-": none)
		}{
			{"helm v3", func(t *testing.T, ns string) { x.helmOK(t, ns, "install", "web", tiny, "--set", "message=one") }, "-"},
			{"helm v4 ssa", func(t *testing.T, ns string) { x.v4.helmOK(t, ns, "install", "web", tiny, "--set", "message=one") }, "ssa"},
			{"helm v4 csa", func(t *testing.T, ns string) {
				x.v4.helmOK(t, ns, "install", "web", tiny, "--set", "message=one", "--server-side=false")
			}, "csa"},
		}
		steps := []string{"list", "upgrade", "rollback", "cancel", "helm v4 upgrade", "uninstall"}
		var mu sync.Mutex
		seen := map[string]map[string]string{}
		t.Run("writers", func(t *testing.T) {
			for _, w := range writers {
				t.Run(w.name, func(t *testing.T) {
					t.Parallel()
					ns := cluster.Namespace(t)
					got := map[string]string{}
					w.install(t, ns)
					methods := []string{applyMethods(t, ns)}
					got["list"] = x.listed(t, ns)
					x.do(t, release.ActionUpgrade, ns, "web", request{values: map[string]any{"message": "two"}})
					methods = append(methods, applyMethods(t, ns))
					got["upgrade"] = x.applied(t, ns)
					x.rollback(t, ns, 1)
					got["rollback"] = x.applied(t, ns)
					x.accept(t, release.ActionUpgrade, ns, "web", request{values: map[string]any{"message": "four"}})
					c, err := x.submit.Cancel(context.Background(), ns, "web", nil)
					if err != nil {
						t.Fatalf("cancel: %v", err)
					}
					got["cancel"] = fmt.Sprintf("%s v%d; %s", c.Status, c.Revision, x.applied(t, ns))
					// Helm v4's next upgrade, with its default --server-side=auto.
					x.v4.helmOK(t, ns, "upgrade", "web", tiny, "--reuse-values", "--set", "message=five")
					methods = append(methods, applyMethods(t, ns))
					got["helm v4 upgrade"] = x.applied(t, ns)
					x.uninstall(t, ns)
					got["uninstall"] = x.applied(t, ns)
					if want := throughAsyncHelmMethods(engine, w.method); strings.Join(methods, ", ") != strings.Join(want, ", ") {
						t.Errorf("apply_method of the records after install, upgrade, helm v4's upgrade: %q, want %q", methods, want)
					}
					mu.Lock()
					seen[w.name] = got
					mu.Unlock()
				})
			}
		})
		var b strings.Builder
		for _, s := range steps {
			want := seen["helm v3"][s]
			fmt.Fprintf(&b, "\n%-16s %s", s, want)
			for _, w := range writers[1:] {
				if got := seen[w.name][s]; got != want {
					t.Errorf("%s on the release %s installed: %q; on helm v3's: %q", s, w.name, got, want)
				}
			}
		}
		t.Logf("the same on every writer:%s", b.String())
		if want := "web deployed v1 tiny-0.1.0; limitInfo: web deployed v1 tiny-0.1.0; history 1:deployed"; seen["helm v3"]["list"] != want {
			t.Errorf("list: %q, want %q", seen["helm v3"]["list"], want)
		}
	})
}

// throughAsyncHelmMethods is applyMethods after the install (revision 1 written with
// method), async-helm's upgrade and helm v4's upgrade in TestHelmV4ReleasesWorkThroughAsyncHelm.
// Helm v3 rewrites revision 1 (superseded) in its own format, without the field; the v4
// engine keeps it and applies client-side. Revision 4 was cancelled before Helm ran (no
// method), so helm v4's --server-side=auto applies client-side after it.
func throughAsyncHelmMethods(engine helmexec.Engine, method string) []string {
	if engine == helmexec.EngineV4 {
		return []string{"1:" + method, "1:" + method + " 2:csa", "1:" + method + " 2:csa 3:csa 4:- 5:csa"}
	}
	return []string{"1:" + method, "1:- 2:-", "1:- 2:- 3:- 4:- 5:csa"}
}

// Helm v3 applies client-side: a strategic merge patch, which the API server never refuses
// for fields another manager owns (only server-side apply has conflicts). So async-helm's
// upgrade of a release helm v4 applied server-side works and takes the fields it changes.
// It applies as field manager "helm": helm v4 then moves them back to server-side apply
// (`--server-side=true`) as on a release the helm v3 CLI upgraded, without a conflict.
func TestServerSideFieldsMeetAsyncHelmsClientSideApply(t *testing.T) {
	x := newInteropV4(t, helmexec.EngineV3)
	ns := cluster.Namespace(t)
	ctx := context.Background()
	tiny := x.charts.ChartURL("tiny", "0.1.0")
	x.v4.helmOK(t, ns, "install", "web", tiny, "--set", "message=one")
	if got := managers(t, ns); got != "helm/Apply" {
		t.Fatalf("managers after helm v4's install: %q", got)
	}
	// Another server-side manager (Flux's helm-controller, a GitOps tool) takes a field.
	cm := corev1apply.ConfigMap("web-config", ns).WithData(map[string]string{"message": "flux"})
	if _, err := cluster.Client.CoreV1().ConfigMaps(ns).Apply(ctx, cm, metav1.ApplyOptions{FieldManager: "helm-controller", Force: true}); err != nil {
		t.Fatal(err)
	}
	x.do(t, release.ActionUpgrade, ns, "web", request{values: map[string]any{"message": "two"}})
	if got := x.get(t, ns, "web", 2); got.Info.Status != helmrelease.StatusDeployed {
		t.Fatalf("async-helm's upgrade over server-side fields: %s %q", got.Info.Status, got.Info.Description)
	}
	if got := x.applied(t, ns); !strings.Contains(got, "message two") {
		t.Fatalf("after async-helm's upgrade: %s", got)
	}
	// The changed field is async-helm's now, under Helm's own manager name.
	if got := managers(t, ns); got != "helm/Apply helm/Update" {
		t.Errorf("managers after async-helm's upgrade: %q, want helm/Apply helm/Update", got)
	}
	out, code := x.v4.run(t, ns, "upgrade", "web", tiny, "--reuse-values", "--set", "message=three", "--server-side=true")
	if code != 0 {
		t.Fatalf("helm v4 upgrade --server-side=true after async-helm's upgrade: exit %d\n%s", code, out)
	}
	if got, want := applyMethods(t, ns), "1:- 2:- 3:ssa"; got != want {
		t.Errorf("apply_method: %q, want %q", got, want)
	}
	// And back: async-helm over the fields helm v4 now owns server-side.
	x.do(t, release.ActionUpgrade, ns, "web", request{values: map[string]any{"message": "four"}})
	if got := x.applied(t, ns); !strings.HasPrefix(got, "1:superseded:tiny-0.1.0 2:superseded:tiny-0.1.0 3:superseded:tiny-0.1.0 4:deployed:tiny-0.1.0; message four") {
		t.Errorf("after async-helm's second upgrade: %s", got)
	}
	var cmNow *corev1.ConfigMap
	cmNow, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, "web-config", metav1.GetOptions{})
	if err != nil || cmNow.Data["message"] != "four" {
		t.Errorf("web-config: %v %v", cmNow, err)
	}
}

// v4State is one state async-helm writes, built by async-helm in one namespace and, when
// Helm has the same state, by the helm v3 CLI in another (the twin); helm v4 acts on both.
type v4State struct {
	name         string
	slow         bool
	ours, theirs func(t *testing.T, ns string) (wait func())
	// want is what each command shows when there is no twin.
	want map[string]string
}

// A release in each state async-helm writes, and the helm v4 CLI's commands on it, beside
// the same commands on the release the helm v3 CLI wrote in that state: async-helm runs
// Helm v3, and its records must be to helm v4 what the helm v3 CLI's are.
func TestHelmV4HandlesAsyncHelmsRecords(t *testing.T) {
	t.Parallel()
	x := newInteropV4(t, helmexec.EngineV3)
	states := v4States(x)
	groups := [][]string{{"list -a", "history", "status", "get values", "get manifest", "uninstall"}, {"upgrade"}, {"rollback"}}
	var tmu sync.Mutex
	table := map[string]map[string][2]string{}
	for _, st := range states {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			got := map[string][2]string{} // command: what it showed on ours, on the twin
			t.Run("releases", func(t *testing.T) {
				for _, g := range groups {
					for side, build := range []func(*testing.T, string) func(){st.ours, st.theirs} {
						if build == nil {
							continue
						}
						t.Run(fmt.Sprintf("%s %s", []string{"ours", "theirs"}[side], g[0]), func(t *testing.T) {
							t.Parallel()
							ns := cluster.Namespace(t)
							if st.slow {
								ns = cluster.SlowNamespace(t)
							}
							if wait := build(t, ns); wait != nil {
								defer wait()
							}
							for _, c := range g {
								o := x.observeV4(t, ns, c)
								mu.Lock()
								r := got[c]
								r[side] = o
								got[c] = r
								mu.Unlock()
							}
						})
					}
				}
			})
			for _, c := range matrixCommands {
				r := got[c]
				if st.theirs == nil {
					r[1] = st.want[c]
					got[c] = r
				}
				if r[0] != r[1] {
					t.Errorf("helm v4 %s: async-helm's record shows\n  %s\nwant\n  %s", c, r[0], r[1])
				}
			}
			tmu.Lock()
			table[st.name] = got
			tmu.Unlock()
		})
	}
	t.Cleanup(func() {
		var b strings.Builder
		for _, st := range states {
			for _, c := range matrixCommands {
				r := table[st.name][c]
				mark := "same as helm v3's record"
				if st.theirs == nil {
					mark = "as expected"
				}
				if r[0] != r[1] {
					mark = "DIFFERS"
				} else if r[0] == "" {
					mark = "not run"
				}
				fmt.Fprintf(&b, "\n%s | %s | %s: %s", st.name, c, mark, r[0])
			}
		}
		t.Log(b.String())
	})
}

// observeV4 is observe run with the helm v4 CLI. Its list shows releases in every status
// by default and has no -a: "list -a" is `list` there.
func (x *interopV4) observeV4(t *testing.T, ns, command string) string {
	t.Helper()
	if command != "list -a" {
		return x.v4.observe(t, ns, command, "")
	}
	out, code := x.v4.run(t, ns, "list", "-o", "json")
	if code != 0 {
		return "error: " + firstLine(out)
	}
	var l []struct{ Name, Status, Chart, Revision string }
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("helm list: %v\n%s", err, out)
	}
	var b []string
	for _, r := range l {
		b = append(b, fmt.Sprintf("%s %s v%s %s", r.Name, r.Status, r.Revision, r.Chart))
	}
	return strings.Join(b, "; ")
}

// v4States are the states of TestHelmV4HandlesAsyncHelmsRecords.
func v4States(x *interopV4) []v4State {
	tiny := x.charts.ChartURL("tiny", "0.1.0")
	one := map[string]any{"message": "one"}
	installOne := func(t *testing.T, ns string) {
		x.do(t, release.ActionInstall, ns, "web", request{chart: "tiny", values: one})
	}
	helmInstallOne := func(t *testing.T, ns string) { x.helmOK(t, ns, "install", "web", tiny, "--set", "message=one") }
	tinyV1 := "[configmap/web-config deployment/web job/web-migrate-1]"
	return []v4State{
		{name: "reserved", ours: func(t *testing.T, ns string) func() {
			installOne(t, ns)
			x.accept(t, release.ActionUpgrade, ns, "web", request{values: map[string]any{"message": "two"}})
			return nil
		}, want: map[string]string{
			"list -a":      "web pending-upgrade v2 tiny-0.1.0",
			"history":      "1:deployed:tiny-0.1.0 2:pending-upgrade:tiny-0.1.0",
			"status":       "pending-upgrade v2",
			"get values":   `{"message":"two"}`,
			"get manifest": tinyV1,
			"upgrade":      "error: Error: UPGRADE FAILED: another operation (install/upgrade/rollback) is in progress",
			"rollback":     "ok; 1:superseded:tiny-0.1.0 2:pending-upgrade:tiny-0.1.0 3:deployed:tiny-0.1.0; [configmap/web-config deployment/web job/web-migrate-1]",
			"uninstall":    "ok; 0 records; left []",
		}},
		{name: "running", slow: true, ours: func(t *testing.T, ns string) func() {
			installOne(t, ns)
			e := x.accept(t, release.ActionUpgrade, ns, "web", request{values: map[string]any{"message": "two", "image": "nginx:1.28"}, wait: true})
			done := make(chan int, 1)
			go func() { done <- x.send(t, e) }()
			waitAdopted(t, x.interop, ns)
			return func() { <-done }
		}, theirs: func(t *testing.T, ns string) func() {
			helmInstallOne(t, ns)
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _ = x.run(t, ns, "upgrade", "web", tiny, "--reuse-values", "--set", "message=two,image=nginx:1.28", "--wait", "--timeout", "2m")
			}()
			waitStatus(t, x.rig, ns, "web", 2, time.Minute, helmrelease.StatusPendingUpgrade)
			return func() { <-done }
		}},
		{name: "deployed", ours: func(t *testing.T, ns string) func() {
			installOne(t, ns)
			x.do(t, release.ActionUpgrade, ns, "web", request{values: map[string]any{"message": "two"}})
			return nil
		}, theirs: func(t *testing.T, ns string) func() {
			helmInstallOne(t, ns)
			x.helmOK(t, ns, "upgrade", "web", tiny, "--set", "message=two")
			return nil
		}},
		{name: "failed before adoption (upgrade)", ours: func(t *testing.T, ns string) func() {
			installOne(t, ns)
			x.do(t, release.ActionUpgrade, ns, "web", request{chart: "badtemplate"})
			return nil
		}, want: map[string]string{
			"list -a":      "web failed v2 tiny-0.1.0",
			"history":      "1:deployed:tiny-0.1.0 2:failed:tiny-0.1.0",
			"status":       "failed v2",
			"get values":   `{"message":"one"}`,
			"get manifest": tinyV1,
			"upgrade":      "ok; 1:superseded:tiny-0.1.0 2:failed:tiny-0.1.0 3:deployed:tiny-0.1.0; [configmap/web-config deployment/web job/web-migrate-3]",
			"rollback":     "ok; 1:superseded:tiny-0.1.0 2:failed:tiny-0.1.0 3:deployed:tiny-0.1.0; [configmap/web-config deployment/web job/web-migrate-1]",
			"uninstall":    "ok; 0 records; left []",
		}},
		{name: "failed before adoption (install)", ours: func(t *testing.T, ns string) func() {
			x.do(t, release.ActionInstall, ns, "web", request{chart: "needsdep"})
			return nil
		}, want: map[string]string{
			"list -a":      "web failed v1 needsdep-0.1.0",
			"history":      "1:failed:needsdep-0.1.0",
			"status":       "failed v1",
			"get values":   "null",
			"get manifest": "[]",
			"upgrade":      "ok; 1:superseded:needsdep-0.1.0 2:deployed:tiny-0.1.0; [configmap/web-config deployment/web job/web-migrate-2]",
			"rollback":     "error: Error: release has no 0 version",
			"uninstall":    "ok; 0 records; left []",
		}},
		{name: "atomic rolled back", ours: func(t *testing.T, ns string) func() {
			x.do(t, release.ActionInstall, ns, "web", request{chart: "tiny", values: one, wait: true})
			x.do(t, release.ActionUpgrade, ns, "web", request{chart: "posthookfail", atomic: true})
			return nil
		}, theirs: func(t *testing.T, ns string) func() {
			x.helmOK(t, ns, "install", "web", tiny, "--set", "message=one", "--wait")
			_, _ = x.run(t, ns, "upgrade", "web", x.charts.ChartURL("posthookfail", "0.1.0"), "--atomic", "--timeout", "2m")
			return nil
		}},
	}
}
