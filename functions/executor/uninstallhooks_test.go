package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/release"
)

// Attack by a namespace editor: it installs a release through async-helm as itself, then
// rewrites the record's hooks to a pre-delete hook that creates a ConfigMap in a namespace
// only an admin may write, and waits for the admin to uninstall the release. The hook is not
// run (async-helm sealed the record's hooks as the tenant wrote none); the release is gone.
func TestRewrittenDeleteHookDoesNotRunAsTheUninstaller(t *testing.T) {
	engines(t, func(t *testing.T, engine helmexec.Engine) {
		key := []byte("uninstall-hooks-test-key-of-32-bytes!!")
		r := newRig(t, Config{HelmEngine: string(engine), EventSigningKey: string(key), EventMaxAge: time.Hour})
		ctx := context.Background()
		ns, prod := cluster.Namespace(t), cluster.Namespace(t)
		if _, err := cluster.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "dev-admin"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "admin"},
			Subjects:   []rbacv1.Subject{{Kind: "User", Name: "dev", APIGroup: "rbac.authorization.k8s.io"}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		deliver := func(a events.Action) {
			t.Helper()
			e, err := events.NewAccepted(a)
			if err != nil {
				t.Fatal(err)
			}
			events.Sign(&e, key, time.Now())
			r.bind(t, &e, key, a)
			if code := r.send(t, e); code != http.StatusOK {
				t.Fatalf("%s: %d", a.Action, code)
			}
		}
		install := r.reserve(t, release.ActionInstall, ns, "web", chartsource.Ref{URL: r.charts.ChartURL("tiny", "0.1.0")}, nil, events.Options{})
		install.Caller = events.Caller{User: "dev", UID: "dev-uid", Groups: []string{"developers", "system:authenticated"}}
		deliver(install)
		if rel := r.get(t, ns, "web", 1); rel.Info.Status != helmrelease.StatusDeployed {
			t.Fatalf("dev's install: %s %q", rel.Info.Status, rel.Info.Description)
		}

		rewriteRecord(t, ns, "web", 1, func(rel *helmrelease.Release) {
			rel.Hooks = append(rel.Hooks, &helmrelease.Hook{Name: "planted", Kind: "ConfigMap", Path: "tiny/templates/planted.yaml",
				Manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: planted\n  namespace: " + prod +
					"\n  annotations:\n    helm.sh/hook: pre-delete\ndata:\n  by: tenant\n",
				Events: []helmrelease.HookEvent{helmrelease.HookPreDelete}})
		})

		id := "web-uninstall-" + time.Now().Format("150405.000000")
		if _, err := r.store.MarkUninstalling(ctx, release.UninstallMark{Namespace: ns, Name: "web", Revision: 1, RequestID: id}); err != nil {
			t.Fatal(err)
		}
		deliver(events.Action{Action: release.ActionUninstall, Namespace: ns, Name: "web", Revision: 1, SecretName: release.SecretName("web", 1),
			RequestID: id, Caller: operatorCaller(), Options: events.Options{Timeout: 2 * time.Minute}})

		if _, err := cluster.Client.CoreV1().ConfigMaps(prod).Get(ctx, "planted", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the tenant's hook created %s/planted with the admin's rights (%v)", prod, err)
		}
		secrets, err := cluster.Client.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "name=web,owner=helm"})
		if err != nil || len(secrets.Items) != 0 {
			t.Errorf("the release's records after the uninstall: %v", err)
			for _, s := range secrets.Items {
				t.Errorf("left: %s", s.Name)
			}
		}
		if _, err := cluster.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the uninstall kept the release's Deployment: %v", err)
		}
	})
}
