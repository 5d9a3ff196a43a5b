package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/operator"
	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/release"
)

// Attack by a namespace editor: it rewrites its release's latest record so that the
// manifest lists objects it may not edit (a ClusterRole; a ConfigMap of another namespace
// owned by a release of the same name there), and waits for an admin to upgrade, roll back
// or uninstall the release. Helm deletes, as the admin, what the current record lists and
// the new one lacks: only objects the release owns go (an owned ConfigMap the tenant listed
// too); the others stay.
func TestRewrittenRecordDeletesOnlyWhatTheReleaseOwns(t *testing.T) {
	engines(t, func(t *testing.T, engine helmexec.Engine) {
		r := newRig(t, Config{HelmEngine: string(engine)})
		ns, other := cluster.Namespace(t), cluster.Namespace(t)
		victims := plantVictims(t, ns, other)
		admin := operatorCaller()
		run := func(a events.Action, want helmrelease.Status) {
			t.Helper()
			a.Caller = admin
			if code := r.deliver(t, a); code != http.StatusOK {
				t.Fatalf("%s: %d", a.Action, code)
			}
			if want != "" {
				if rel := r.get(t, ns, "web", a.Revision); rel.Info.Status != want {
					t.Fatalf("%s: %s %q", a.Action, rel.Info.Status, rel.Info.Description)
				}
			}
		}
		chart := chartsource.Ref{URL: r.charts.ChartURL("tiny", "0.1.0")}
		run(r.reserve(t, release.ActionInstall, ns, "web", chart, nil, events.Options{}), helmrelease.StatusDeployed)
		run(r.reserve(t, release.ActionUpgrade, ns, "web", chart, nil, events.Options{}), helmrelease.StatusDeployed)

		owned := ownedConfigMap(t, ns, "web-extra")
		listVictims(t, ns, "web", 2, victims, owned)
		rb := r.reserve(t, release.ActionRollback, ns, "web", chartsource.Ref{}, nil, events.Options{})
		rb.RollbackTo, rb.ReuseChart = 1, false
		pin, err := release.PinOf(r.get(t, ns, "web", 1), applyMethod(t, r, ns, "web", 1))
		if err != nil {
			t.Fatal(err)
		}
		rb.RollbackPin = pin
		run(rb, helmrelease.StatusDeployed)
		victims.stillThere(t, "the rollback")
		if _, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), owned, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the rollback kept %s, which the release owns: %v", owned, err)
		}

		listVictims(t, ns, "web", 3, victims)
		run(r.reserve(t, release.ActionUpgrade, ns, "web", chart, nil, events.Options{}), helmrelease.StatusDeployed)
		victims.stillThere(t, "the upgrade")

		listVictims(t, ns, "web", 4, victims)
		id := "web-uninstall"
		if _, err := r.store.MarkUninstalling(context.Background(), release.UninstallMark{Namespace: ns, Name: "web", Revision: 4, RequestID: id}); err != nil {
			t.Fatal(err)
		}
		run(events.Action{Action: release.ActionUninstall, Namespace: ns, Name: "web", Revision: 4, SecretName: release.SecretName("web", 4),
			RequestID: id, Options: events.Options{Timeout: 2 * time.Minute}}, "")
		victims.stillThere(t, "the uninstall")
		if _, err := cluster.Client.AppsV1().Deployments(ns).Get(context.Background(), "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the uninstall kept the release's own Deployment: %v", err)
		}
	})
}

// operatorCaller is an identity whose rights come from RBAC (cluster-admin), as an admin's
// request carries it.
func operatorCaller() events.Caller {
	return events.Caller{User: operator.User, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + operator.Namespace, "system:authenticated"}}
}

// victims are objects a tenant of ns may not edit.
type victims struct {
	clusterRole, hidden, otherNS string
}

func plantVictims(t *testing.T, ns, other string) victims {
	t.Helper()
	ctx := context.Background()
	v := victims{clusterRole: ns + "-victim", hidden: ns + "-hidden", otherNS: other}
	for _, name := range []string{v.clusterRole, v.hidden} {
		if _, err := cluster.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cluster.Client.RbacV1().ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{}) })
	}
	// Owned by the release of the same name in the other namespace.
	if _, err := cluster.Client.CoreV1().ConfigMaps(other).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "victim",
		Labels:      map[string]string{"app.kubernetes.io/managed-by": "Helm"},
		Annotations: map[string]string{"meta.helm.sh/release-name": "web", "meta.helm.sh/release-namespace": other}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return v
}

// manifest lists the victims; hidden as a hook whose annotation Helm's sorter does not see
// (annotationſ folds onto annotations there and its null comes last) but the built
// object carries.
func (v victims) manifest() string {
	return "\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: " + v.clusterRole +
		"\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: " + v.hidden +
		"\n  annotations:\n    helm.sh/hook: pre-install\n  annotation\u017f: null" +
		"\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: victim\n  namespace: " + v.otherNS + "\n"
}

func (v victims) stillThere(t *testing.T, after string) {
	t.Helper()
	ctx := context.Background()
	for _, name := range []string{v.clusterRole, v.hidden} {
		if _, err := cluster.Client.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("after %s, ClusterRole %s: %v", after, name, err)
		}
	}
	if _, err := cluster.Client.CoreV1().ConfigMaps(v.otherNS).Get(ctx, "victim", metav1.GetOptions{}); err != nil {
		t.Errorf("after %s, ConfigMap %s/victim: %v", after, v.otherNS, err)
	}
}

// ownedConfigMap is an object the release ns/web owns (as Helm marks it), not in its chart.
func ownedConfigMap(t *testing.T, ns, name string) string {
	t.Helper()
	if _, err := cluster.Client.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels:      map[string]string{"app.kubernetes.io/managed-by": "Helm"},
		Annotations: map[string]string{"meta.helm.sh/release-name": "web", "meta.helm.sh/release-namespace": ns}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return name
}

// listVictims is the tenant's rewrite: revision rev's manifest also lists the victims (and
// the named ConfigMaps of ns).
func listVictims(t *testing.T, ns, name string, rev int, v victims, configMaps ...string) {
	t.Helper()
	rewriteRecord(t, ns, name, rev, func(rel *helmrelease.Release) {
		rel.Manifest += v.manifest()
		for _, cm := range configMaps {
			rel.Manifest += "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + cm + "\n"
		}
	})
}

// rewriteRecord is a namespace editor changing revision rev of ns/name in place.
func rewriteRecord(t *testing.T, ns, name string, rev int, change func(*helmrelease.Release)) {
	t.Helper()
	ctx := context.Background()
	secrets := cluster.Client.CoreV1().Secrets(ns)
	sec, err := secrets.Get(ctx, release.SecretName(name, rev), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rel, err := release.DecodeRelease(sec.Data["release"])
	if err != nil {
		t.Fatal(err)
	}
	change(rel)
	if sec.Data["release"], err = release.EncodeRelease(rel); err != nil {
		t.Fatal(err)
	}
	if _, err := secrets.Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// applyMethod is the apply method a rollback pin covers, as submit reads it.
func applyMethod(t *testing.T, r *rig, ns, name string, rev int) string {
	t.Helper()
	m, err := r.store.ApplyMethod(context.Background(), ns, name, rev)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
