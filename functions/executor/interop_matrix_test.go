package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/release"
)

// matrixState is one state async-helm writes, built by async-helm in one namespace and,
// when Helm has the same state, by the helm CLI in another (the twin).
type matrixState struct {
	name string
	// ours builds the state with async-helm; wait, when set, is called after the test to
	// let a background action end.
	ours func(t *testing.T, x *interop, ns string) (wait func())
	// theirs builds the same state with the helm CLI; nil when Helm never writes it.
	theirs func(t *testing.T, x *interop, ns string) (wait func())
	// want is what each command shows when there is no twin.
	want map[string]string
	// rev is the revision the read commands and rollback name ("" = latest, and
	// rollback to the previous one).
	rev  string
	slow bool
}

var matrixCommands = []string{"list -a", "history", "status", "get values", "get manifest", "upgrade", "rollback", "uninstall"}

// observe runs one command on release web in ns and reduces what it shows to what must
// be the same on a release Helm wrote.
func (x *interop) observe(t *testing.T, ns, command, rev string) string {
	t.Helper()
	revArgs := func() []string {
		if rev == "" {
			return nil
		}
		return []string{"--revision", rev}
	}
	switch command {
	case "list -a":
		out, code := x.run(t, ns, "list", "-a", "-o", "json")
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
	case "history":
		return x.history(t, ns, "web")
	case "status":
		out, code := x.run(t, ns, append([]string{"status", "web", "-o", "json"}, revArgs()...)...)
		if code != 0 {
			return "error: " + firstLine(out)
		}
		var s struct {
			Info    struct{ Status string }
			Version int
		}
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatalf("helm status: %v\n%s", err, out)
		}
		return fmt.Sprintf("%s v%d", s.Info.Status, s.Version)
	case "get values":
		out, code := x.run(t, ns, append([]string{"get", "values", "web", "-o", "json"}, revArgs()...)...)
		if code != 0 {
			return "error: " + firstLine(out)
		}
		return strings.TrimSpace(out)
	case "get manifest":
		out, code := x.run(t, ns, append([]string{"get", "manifest", "web"}, revArgs()...)...)
		if code != 0 {
			return "error: " + firstLine(out)
		}
		return "[" + strings.Join(manifestResources(out), " ") + "]"
	case "upgrade":
		out, code := x.run(t, ns, "upgrade", "web", x.charts.ChartURL("tiny", "0.1.0"), "--set", "message=up")
		if code != 0 {
			return "error: " + firstLine(out)
		}
		return "ok; " + x.history(t, ns, "web") + "; " + fmt.Sprint(resources(t, ns))
	case "rollback":
		args := []string{"rollback", "web"}
		if rev != "" {
			args = append(args, rev)
		}
		out, code := x.run(t, ns, args...)
		if code != 0 {
			return "error: " + firstLine(out)
		}
		return "ok; " + x.history(t, ns, "web") + "; " + fmt.Sprint(resources(t, ns))
	case "uninstall":
		out, code := x.run(t, ns, "uninstall", "web")
		if code != 0 {
			return "error: " + firstLine(out)
		}
		secrets, err := cluster.Client.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "owner=helm"})
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("ok; %d records; left %v", len(secrets.Items), resources(t, ns))
	}
	t.Fatalf("unknown command %q", command)
	return ""
}

// matrixActions is how many actions a matrix's executor holds at once: as many as its cells
// run at once (TestMain's parallel bound), so none is refused with 429.
const matrixActions = 8

// A release in each state async-helm writes, and the helm CLI's commands on it, next to
// the same commands on the release Helm itself wrote in that state.
func TestHelmHandlesEveryRecordAsItsOwn(t *testing.T) {
	// Beside the v4 matrix: each has four cells that wait on slow pods for 60 s.
	t.Parallel()
	x := newInterop(t, Config{MaxParallel: matrixActions})
	tiny := func() string { return x.charts.ChartURL("tiny", "0.1.0") }
	one := map[string]any{"message": "one"}
	installOne := func(t *testing.T, x *interop, ns string) {
		x.do(t, release.ActionInstall, ns, "web", request{chart: "tiny", values: one})
	}
	helmInstallOne := func(t *testing.T, x *interop, ns string) {
		x.helmOK(t, ns, "install", "web", tiny(), "--set", "message=one")
	}
	// running: Helm has adopted the upgrade and waits for pods that get Ready after the
	// slow namespace's delay.
	runningOurs := func(t *testing.T, x *interop, ns string) func() {
		installOne(t, x, ns)
		e := x.accept(t, release.ActionUpgrade, ns, "web", request{values: map[string]any{"message": "two", "image": "nginx:1.28"}, wait: true})
		done := make(chan int, 1)
		go func() { done <- x.send(t, e) }()
		waitAdopted(t, x, ns)
		return func() {
			select {
			case <-done:
			case <-time.After(5 * time.Minute):
				t.Error("the running upgrade never ended")
			}
		}
	}
	runningTheirs := func(t *testing.T, x *interop, ns string) func() {
		helmInstallOne(t, x, ns)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = x.run(t, ns, "upgrade", "web", tiny(), "--reuse-values", "--set", "message=two,image=nginx:1.28", "--wait", "--timeout", "2m")
		}()
		waitStatus(t, x.rig, ns, "web", 2, time.Minute, helmrelease.StatusPendingUpgrade)
		return func() { <-done }
	}
	tinyV1 := "[configmap/web-config deployment/web job/web-migrate-1]"
	states := []matrixState{
		{name: "reserved", ours: func(t *testing.T, x *interop, ns string) func() {
			installOne(t, x, ns)
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
		{name: "running", slow: true, ours: runningOurs, theirs: runningTheirs},
		{name: "deployed", ours: func(t *testing.T, x *interop, ns string) func() {
			installOne(t, x, ns)
			x.do(t, release.ActionUpgrade, ns, "web", request{values: map[string]any{"message": "two"}})
			return nil
		}, theirs: func(t *testing.T, x *interop, ns string) func() {
			helmInstallOne(t, x, ns)
			x.helmOK(t, ns, "upgrade", "web", tiny(), "--set", "message=two")
			return nil
		}},
		{name: "superseded", rev: "1", ours: func(t *testing.T, x *interop, ns string) func() {
			installOne(t, x, ns)
			x.do(t, release.ActionUpgrade, ns, "web", request{values: map[string]any{"message": "two"}})
			return nil
		}, theirs: func(t *testing.T, x *interop, ns string) func() {
			helmInstallOne(t, x, ns)
			x.helmOK(t, ns, "upgrade", "web", tiny(), "--set", "message=two")
			return nil
		}},
		{name: "failed before adoption (upgrade)", ours: func(t *testing.T, x *interop, ns string) func() {
			installOne(t, x, ns)
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
		{name: "failed before adoption (install)", ours: func(t *testing.T, x *interop, ns string) func() {
			x.do(t, release.ActionInstall, ns, "web", request{chart: "needsdep"})
			return nil
		}, want: map[string]string{
			"list -a":      "web failed v1 needsdep-0.1.0",
			"history":      "1:failed:needsdep-0.1.0",
			"status":       "failed v1",
			"get values":   "null", // as on any release installed without values
			"get manifest": "[]",
			// Helm's upgrade supersedes the failed revision it started from.
			"upgrade":   "ok; 1:superseded:needsdep-0.1.0 2:deployed:tiny-0.1.0; [configmap/web-config deployment/web job/web-migrate-2]",
			"rollback":  "error: Error: release has no 0 version",
			"uninstall": "ok; 0 records; left []",
		}},
		{name: "failed after adoption", ours: func(t *testing.T, x *interop, ns string) func() {
			installOne(t, x, ns)
			x.do(t, release.ActionUpgrade, ns, "web", request{chart: "hookfail"})
			return nil
		}, theirs: func(t *testing.T, x *interop, ns string) func() {
			helmInstallOne(t, x, ns)
			_, _ = x.run(t, ns, "upgrade", "web", x.charts.ChartURL("hookfail", "0.1.0"))
			return nil
		}},
		{name: "atomic rolled back", ours: func(t *testing.T, x *interop, ns string) func() {
			x.do(t, release.ActionInstall, ns, "web", request{chart: "tiny", values: one, wait: true})
			x.do(t, release.ActionUpgrade, ns, "web", request{chart: "posthookfail", atomic: true})
			return nil
		}, theirs: func(t *testing.T, x *interop, ns string) func() {
			x.helmOK(t, ns, "install", "web", tiny(), "--set", "message=one", "--wait")
			_, _ = x.run(t, ns, "upgrade", "web", x.charts.ChartURL("posthookfail", "0.1.0"), "--atomic", "--timeout", "2m")
			return nil
		}},
	}

	type cell struct{ ours, theirs string }
	var mu sync.Mutex
	table := map[string]map[string]cell{}
	for _, st := range states {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			// Each mutating command gets its own release in the state; the reads share the
			// one that is uninstalled last.
			groups := [][]string{{"list -a", "history", "status", "get values", "get manifest", "uninstall"}, {"upgrade"}, {"rollback"}}
			results := map[string]cell{}
			var rmu sync.Mutex
			t.Run("releases", func(t *testing.T) {
				for _, g := range groups {
					for _, side := range []string{"ours", "theirs"} {
						build := st.ours
						if side == "theirs" {
							build = st.theirs
						}
						if build == nil {
							continue
						}
						t.Run(side+" "+g[0], func(t *testing.T) {
							t.Parallel()
							ns := cluster.Namespace(t)
							if st.slow {
								ns = cluster.SlowNamespace(t)
							}
							if wait := build(t, x, ns); wait != nil {
								defer wait()
							}
							for _, c := range g {
								got := x.observe(t, ns, c, st.rev)
								rmu.Lock()
								r := results[c]
								if side == "ours" {
									r.ours = got
								} else {
									r.theirs = got
								}
								results[c] = r
								rmu.Unlock()
							}
						})
					}
				}
			})
			for _, c := range matrixCommands {
				r := results[c]
				want := r.theirs
				if st.theirs == nil {
					want = st.want[c]
				}
				if r.ours != want {
					t.Errorf("%s: async-helm's record shows\n  %s\nwant (%s)\n  %s", c, r.ours, map[bool]string{true: "by hand: Helm writes no such record", false: "the helm CLI's own release"}[st.theirs == nil], want)
				}
				if st.theirs == nil {
					r.theirs = "(no helm twin) " + want
				}
				results[c] = r
			}
			mu.Lock()
			table[st.name] = results
			mu.Unlock()
		})
	}
	t.Cleanup(func() {
		var b strings.Builder
		b.WriteString("\n| state | " + strings.Join(matrixCommands, " | ") + " |\n|---|" + strings.Repeat("---|", len(matrixCommands)) + "\n")
		names := make([]string, 0, len(states))
		for _, st := range states {
			names = append(names, st.name)
		}
		for _, n := range names {
			b.WriteString("| " + n + " |")
			for _, c := range matrixCommands {
				r := table[n][c]
				mark := "same as helm"
				if r.ours != strings.TrimPrefix(r.theirs, "(no helm twin) ") {
					mark = "DIFFERS"
				} else if strings.HasPrefix(r.theirs, "(no helm twin)") {
					mark = "as expected"
				}
				b.WriteString(" " + mark + ": `" + r.ours + "` |")
			}
			b.WriteString("\n")
		}
		t.Log(b.String())
	})
}

// waitAdopted waits until Helm has written revision 2 (pending-upgrade, with its chart).
func waitAdopted(t *testing.T, x *interop, ns string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		rel, err := x.store.Get(context.Background(), ns, "web", 2)
		if err == nil && rel.Info.Status == helmrelease.StatusPendingUpgrade && len(rel.Chart.Templates) > 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("Helm never adopted revision 2")
}
