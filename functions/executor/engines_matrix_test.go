package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/testwait"
	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/lease"
)

// matrixOp is one who acts on a release in the cross-engine matrix: an engine (async-helm
// on Helm v3 or v4) or a CLI (helm v3, helm v4).
type matrixOp struct {
	name                         string
	upgrade, rollback, uninstall func(t *testing.T, ns string)
	// cancel cancels a revision of web: an engine's running upgrade (its wait ended by the
	// cancel; what it applied stays, as after any failed upgrade); for a CLI, an upgrade
	// async-helm accepted and cancelled before it ran.
	cancel func(t *testing.T, ns string)
	// cancelled is the message web's ConfigMap holds after the cancel.
	cancelled string
	// methods is the apply_method of revisions 1-4 before the uninstall, given revision 1's
	// as written ("-" for none): Helm v3 (engine or CLI) rewrites revision 1 (superseded)
	// without it; a revision the executor failed keeps what Helm v4 wrote, one submit
	// failed before Helm ran has none.
	methods func(written string) string
}

func helmV3Methods(string) string { return "1:- 2:- 3:- 4:-" }

func engineOp(name string, x *interopV4) matrixOp {
	methods := helmV3Methods
	if x.fn.cfg.HelmEngine == string(helmexec.EngineV4) {
		methods = func(w string) string { return "1:" + w + " 2:csa 3:csa 4:csa" }
	}
	return matrixOp{
		name: name, cancelled: "four", methods: methods,
		upgrade: func(t *testing.T, ns string) {
			x.do(t, release.ActionUpgrade, ns, "web", request{values: map[string]any{"message": "two"}})
		},
		rollback:  func(t *testing.T, ns string) { x.rollback(t, ns, 1) },
		uninstall: func(t *testing.T, ns string) { x.uninstall(t, ns) },
		cancel: func(t *testing.T, ns string) {
			ev := x.accept(t, release.ActionUpgrade, ns, "web", request{values: map[string]any{"message": "four"}, wait: true})
			done := make(chan int, 1)
			go func() { done <- x.send(t, ev) }()
			waitLease(t, ns, release.SecretName("web", 4))
			waitApplied(t, ns) // cancelled in its wait, not while it applies
			if _, err := x.submit.Cancel(context.Background(), ns, "web", nil); err != nil {
				t.Fatalf("cancel: %v", err)
			}
			if code := <-done; code != http.StatusOK {
				t.Fatalf("executor answered %d", code)
			}
		},
	}
}

// waitApplied waits until revision 4's apply is over and Helm waits on the slow pods: the
// Job of revision 3 (revision 1's manifest, rolled back to) is deleted only after every
// resource of revision 4 was applied. A cancel during the apply leaves that Job behind,
// as an interrupted helm upgrade does.
func waitApplied(t *testing.T, ns string) {
	t.Helper()
	testwait.Within(t, time.Minute, "revision 4's apply (web-migrate-1 deleted)", func() bool {
		_, err := cluster.Client.BatchV1().Jobs(ns).Get(context.Background(), "web-migrate-1", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

func cliOp(name string, cli *interop, async *interopV4, tiny string) matrixOp {
	methods := helmV3Methods
	if name == "helm v4" { // --server-side=auto: revision 1's method ("-" reads as csa)
		methods = func(w string) string {
			m := map[string]string{"-": "csa"}[w]
			if m == "" {
				m = w
			}
			return "1:" + w + " 2:" + m + " 3:" + m + " 4:-"
		}
	}
	return matrixOp{
		name: name, cancelled: "one", methods: methods,
		upgrade: func(t *testing.T, ns string) {
			cli.helmOK(t, ns, "upgrade", "web", tiny, "--reuse-values", "--set", "message=two")
		},
		rollback:  func(t *testing.T, ns string) { cli.helmOK(t, ns, "rollback", "web", "1") },
		uninstall: func(t *testing.T, ns string) { cli.helmOK(t, ns, "uninstall", "web") },
		cancel: func(t *testing.T, ns string) {
			async.accept(t, release.ActionUpgrade, ns, "web", request{values: map[string]any{"message": "four"}})
			if _, err := async.submit.Cancel(context.Background(), ns, "web", nil); err != nil {
				t.Fatalf("cancel: %v", err)
			}
			cli.helmOK(t, ns, "status", "web") // the CLI reads the cancelled revision as its own
		},
	}
}

// observed is a release's state as every cell must show it: its history as the helm v3
// CLI lists it and the message its ConfigMap holds.
func observed(t *testing.T, x *interop, ns string) string {
	t.Helper()
	cm, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "web-config", metav1.GetOptions{})
	msg := "none"
	if err == nil {
		msg = cm.Data["message"]
	}
	return x.history(t, ns, "web") + " | " + msg
}

// Records written by each engine (v4 client- and server-side), each upgraded, rolled back,
// cancelled and uninstalled by the other engine and by both CLIs: every cell shows what the
// writer's own engine would, step by step (docs/design.md, "Two engines").
func TestRecordsCrossEngines(t *testing.T) {
	x3 := newInteropV4(t, helmexec.EngineV3)
	x4 := &interopV4{interop: newInterop(t, Config{HelmEngine: string(helmexec.EngineV4), MaxParallel: matrixActions})}
	for _, x := range []*interopV4{x3, x4} {
		x.submit.Heartbeat = &lease.Heartbeat{Client: cluster.Client, Holder: "submit", Duration: time.Hour,
			CancelKey: []byte(x.fn.cfg.EventSigningKey)}
	}
	tiny := x3.charts.ChartURL("tiny", "0.1.0")
	one := map[string]any{"message": "one"}
	writers := []struct {
		name    string
		install func(t *testing.T, ns string)
		methods string // apply_method of revision 1
		others  []matrixOp
	}{
		{"v3 engine", func(t *testing.T, ns string) {
			x3.do(t, release.ActionInstall, ns, "web", request{chart: "tiny", values: one})
		}, "1:-",
			[]matrixOp{engineOp("v4 engine", x4), cliOp("helm v3", x3.interop, x3, tiny), cliOp("helm v4", x3.v4, x3, tiny)}},
		{"v4 engine client-side", func(t *testing.T, ns string) {
			x4.do(t, release.ActionInstall, ns, "web", request{chart: "tiny", values: one})
		}, "1:csa",
			[]matrixOp{engineOp("v3 engine", x3), cliOp("helm v3", x3.interop, x4, tiny), cliOp("helm v4", x3.v4, x4, tiny)}},
		{"v4 engine server-side", func(t *testing.T, ns string) {
			x4.do(t, release.ActionInstall, ns, "web", request{chart: "tiny", values: one, serverSide: api.ServerSideTrue})
		}, "1:ssa", []matrixOp{engineOp("v3 engine", x3), cliOp("helm v3", x3.interop, x4, tiny), cliOp("helm v4", x3.v4, x4, tiny)}},
	}
	want := []string{
		"1:deployed:tiny-0.1.0 | one",
		"1:superseded:tiny-0.1.0 2:deployed:tiny-0.1.0 | two",
		"1:superseded:tiny-0.1.0 2:superseded:tiny-0.1.0 3:deployed:tiny-0.1.0 | one",
		"1:superseded:tiny-0.1.0 2:superseded:tiny-0.1.0 3:deployed:tiny-0.1.0 4:failed:tiny-0.1.0 | ",
		"error: Error: release: not found | none",
	}
	for _, w := range writers {
		for _, op := range w.others {
			t.Run(w.name+"/"+op.name, func(t *testing.T) {
				t.Parallel()
				ns := cluster.SlowNamespace(t) // pods never ready while a cancelled wait holds
				w.install(t, ns)
				if m := applyMethods(t, ns); m != w.methods {
					t.Errorf("apply_method after the install: %q, want %q", m, w.methods)
				}
				got := []string{observed(t, x3.interop, ns)}
				steps := []func(*testing.T, string){op.upgrade, op.rollback, op.cancel}
				for _, step := range steps {
					step(t, ns)
					got = append(got, observed(t, x3.interop, ns))
				}
				methods := applyMethods(t, ns)
				rel, err := x3.store.Get(context.Background(), ns, "web", 4)
				if err != nil || rel.Info.Status != helmrelease.StatusFailed || !strings.Contains(rel.Info.Description, "cancelled") {
					t.Errorf("the cancelled revision: %v", describe(rel, err))
				}
				op.uninstall(t, ns)
				got = append(got, observed(t, x3.interop, ns))
				if left := resources(t, ns); len(left) != 0 {
					got[len(got)-1] += fmt.Sprintf(" (left: %v)", left)
				}
				want := append([]string(nil), want...)
				want[3] += op.cancelled
				for i := range want {
					if got[i] != want[i] {
						t.Errorf("step %d: %q, want %q", i, got[i], want[i])
					}
				}
				if want := op.methods(strings.TrimPrefix(w.methods, "1:")); methods != want {
					t.Errorf("apply_method before the uninstall: %s, want %s", methods, want)
				}
			})
		}
	}
}

func describe(rel *helmrelease.Release, err error) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%s %q", rel.Info.Status, rel.Info.Description)
}
