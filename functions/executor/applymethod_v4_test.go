package main

import (
	"context"
	"strings"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/release"
)

// The v4 engine's apply methods on the cluster (docs/api.md, server_side and
// force_conflicts): a server-side upgrade over a field another manager took fails naming
// that manager (the record keeps Helm's description, in the API server's words) and leaves
// the field; force_conflicts takes it over; "auto" applies as the
// record being replaced (an upgrade: the latest; a rollback: its target) was applied, and
// a new release client-side; with force_conflicts it forces only where that is server-side.
func TestV4ApplyMethodsConflictsAndAuto(t *testing.T) {
	x := &interopV4{interop: newInterop(t, Config{HelmEngine: string(helmexec.EngineV4)})}
	ns := cluster.Namespace(t)
	ctx := context.Background()
	rev := 1
	upgrade := func(message string, serverSide api.ServerSide, force bool) *helmrelease.Release {
		t.Helper()
		x.do(t, release.ActionUpgrade, ns, "web", request{values: map[string]any{"message": message},
			serverSide: serverSide, forceConflicts: force})
		rev++
		return x.get(t, ns, "web", rev)
	}
	message := func() string {
		t.Helper()
		cm, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, "web-config", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cm.Data["message"]
	}

	x.do(t, release.ActionInstall, ns, "web", request{chart: "tiny", values: map[string]any{"message": "one"}, serverSide: api.ServerSideTrue})
	if got := managers(t, ns); got != "helm/Apply" {
		t.Fatalf("managers after the server-side install: %q", got)
	}
	// Another server-side manager (Flux's helm-controller, a GitOps tool) takes a field.
	takeField := func() {
		t.Helper()
		cm := corev1apply.ConfigMap("web-config", ns).WithData(map[string]string{"message": "flux"})
		if _, err := cluster.Client.CoreV1().ConfigMaps(ns).Apply(ctx, cm, metav1.ApplyOptions{FieldManager: "helm-controller", Force: true}); err != nil {
			t.Fatal(err)
		}
	}
	takeField()
	if rel := upgrade("two", api.ServerSideTrue, false); rel.Info.Status != helmrelease.StatusFailed ||
		!strings.Contains(rel.Info.Description, `conflict with "helm-controller"`) {
		t.Fatalf("a server-side upgrade over helm-controller's field: %s %q, want failed naming helm-controller", rel.Info.Status, rel.Info.Description)
	}
	if got := message(); got != "flux" {
		t.Errorf("after the refused upgrade the field holds %q, want helm-controller's flux", got)
	}
	if rel := upgrade("three", api.ServerSideTrue, true); rel.Info.Status != helmrelease.StatusDeployed {
		t.Fatalf("force_conflicts: %s %q", rel.Info.Status, rel.Info.Description)
	}
	if got, ms := message(), managers(t, ns); got != "three" || strings.Contains(ms, "helm-controller") {
		t.Errorf("after force_conflicts: message %q, managers %q; want three, helm-controller's field taken", got, ms)
	}
	// auto after a server-side revision forces: helm-controller's field again.
	takeField()
	if rel := upgrade("four", api.ServerSideAuto, true); rel.Info.Status != helmrelease.StatusDeployed || message() != "four" {
		t.Fatalf("auto and force_conflicts after a server-side revision: %s %q, message %q", rel.Info.Status, rel.Info.Description, message())
	}
	upgrade("five", api.ServerSideFalse, false) // client-side
	// auto after a client-side revision applies client-side, where a force means nothing.
	if rel := upgrade("six", api.ServerSideAuto, true); rel.Info.Status != helmrelease.StatusDeployed {
		t.Fatalf("auto and force_conflicts after a client-side revision: %s %q", rel.Info.Status, rel.Info.Description)
	}
	x.rollbackAs(t, ns, 3, api.ServerSideAuto) // revision 3 was server-side
	if rel := x.get(t, ns, "web", 7); rel.Info.Status != helmrelease.StatusDeployed || message() != "three" {
		t.Fatalf("rollback to 3: %s %q, message %q", rel.Info.Status, rel.Info.Description, message())
	}
	if got, want := applyMethods(t, ns), "1:ssa 2:ssa 3:ssa 4:ssa 5:csa 6:csa 7:ssa"; got != want {
		t.Errorf("apply_method: %q, want %q", got, want)
	}
	fresh := cluster.Namespace(t)
	x.do(t, release.ActionInstall, fresh, "web", request{chart: "tiny", serverSide: api.ServerSideAuto})
	if got := applyMethods(t, fresh); got != "1:csa" {
		t.Errorf("a new release with server_side auto: %q, want 1:csa (nothing replaced: client-side)", got)
	}
}
