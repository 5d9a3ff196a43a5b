package clustertest

import (
	"context"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/release"
)

// A template's lookups, rendered in a worker, are answered through the action's identity:
// a tenant that edits its namespace reads its own ConfigMap, and is refused another
// namespace's as Helm's in-process render refuses it.
func TestLookupsInAWorkerAreTheCallers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns, other := cluster.Namespace(t), cluster.Namespace(t)
	for _, o := range []struct{ ns, name string }{{ns, "seen"}, {other, "hidden"}} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: o.name}, Data: map[string]string{"v": "from " + o.ns}}
		if _, err := cluster.Client.CoreV1().ConfigMaps(o.ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bob-edits"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "tenant-bob"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"}}
	if _, err := cluster.Client.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pool := &helmexec.RenderPool{}
	t.Cleanup(pool.Close)
	f, err := helmexec.NewFactory(cluster.Admin, helmexec.WithRenderWorkers(pool))
	if err != nil {
		t.Fatal(err)
	}
	bob := helmexec.WithImpersonation("tenant-bob", "", []string{"system:authenticated"}, nil)
	rel, err := installAs(ctx, t, f, ns, "own", lookupChart(`{{ (lookup "v1" "ConfigMap" .Release.Namespace "seen").data.v | quote }}`), bob)
	if err != nil || !strings.Contains(rel.Manifest, `"from `+ns+`"`) {
		t.Fatalf("install looking up its own ConfigMap: %v, release %+v", err, rel)
	}
	_, err = installAs(ctx, t, f, ns, "theirs", lookupChart(`{{ (lookup "v1" "ConfigMap" "`+other+`" "hidden").data.v | quote }}`), bob)
	if err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Fatalf("install looking up another namespace's ConfigMap: %v, want forbidden", err)
	}
}

// installAs reserves revision 1 as submit does and runs the factory's install of it.
func installAs(ctx context.Context, t *testing.T, f *helmexec.Factory, ns, name string, ch *chart.Chart, opts ...helmexec.Option) (*helmrelease.Release, error) {
	t.Helper()
	store := &release.Store{Client: cluster.Client}
	if _, err := store.Reserve(ctx, release.Reservation{Namespace: ns, Name: name, Action: release.ActionInstall,
		Revision: 1, Chart: ch.Metadata, RequestID: name}); err != nil {
		t.Fatal(err)
	}
	return f.Install(ctx, helmexec.Request{Namespace: ns, Name: name, Revision: 1, Chart: ch, Timeout: time.Minute,
		RenderTimeout: time.Minute, Labels: release.Labels(name, 1, ch.Metadata.Name, ch.Metadata.Version)}, opts...)
}

// lookupChart is a chart of one ConfigMap whose value is expr.
func lookupChart(expr string) *chart.Chart {
	return &chart.Chart{Metadata: &chart.Metadata{APIVersion: "v2", Name: "looks", Version: "0.1.0"},
		Templates: []*chart.File{{Name: "templates/cm.yaml",
			Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  v: " + expr + "\n")}}}
}
