package main

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/async-helm/async-helm/pkg/api"
	chartrepos "github.com/async-helm/async-helm/pkg/chart/repos"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/lease"
)

// The all-namespaces list without limitInfo (Helm's list) answers dev only the namespaces
// dev may read, as the lean list does.
func TestAllNamespacesHelmListOnlyReadable(t *testing.T) {
	s := newStack(t)
	if cluster.Dev.BearerToken == "" {
		t.Skip("the kubeconfig has no dev token (not the local cluster)")
	}
	mine, other := cluster.Namespace(t), cluster.Namespace(t)
	for _, ns := range []string{mine, other} {
		if code, _ := s.call(t, http.MethodPost, api.PathAsync, s.install("web", ns), nil); code != http.StatusCreated {
			t.Fatalf("install in %s: %d", ns, code)
		}
	}
	grant(t, mine, "edit")
	s.token = cluster.Dev.BearerToken
	var rels []map[string]any
	if code, _ := s.call(t, http.MethodGet, api.PathList, nil, &rels); code != http.StatusOK {
		t.Fatalf("dev lists all namespaces: %d", code)
	}
	if n := inNamespace(rels, other); n != 0 {
		t.Errorf("dev sees %d releases of %s, which it may not read", n, other)
	}
	if n := inNamespace(rels, mine); n != 1 {
		t.Errorf("dev sees %d releases of its namespace, want 1", n)
	}
}

// inNamespace counts the listed releases of ns.
func inNamespace(rels []map[string]any, ns string) int {
	n := 0
	for _, r := range rels {
		if r["namespace"] == ns {
			n++
		}
	}
	return n
}

// Cancel of a running uninstall answers 409 with the reason; the Lease is left alone.
func TestCancelOfARunningUninstallIs409(t *testing.T) {
	s := newStack(t)
	ns := cluster.Namespace(t)
	if code, _ := s.call(t, http.MethodPost, api.PathAsync, s.install("web", ns), nil); code != http.StatusCreated {
		t.Fatal(code)
	}
	store := &release.Store{Client: cluster.Client}
	if _, err := markDeployed(store, ns, "web", 1); err != nil {
		t.Fatal(err)
	}
	if code, _ := s.call(t, http.MethodDelete, api.PathAsync+"?ns="+ns+"&name=web", nil, nil); code != http.StatusNoContent {
		t.Fatalf("uninstall: %d", code)
	}
	exec := &lease.Heartbeat{Client: cluster.Client, Holder: "executor-test", Duration: time.Minute}
	held, err := exec.Hold(context.Background(), ns, release.LeaseName("web", 1))
	if err != nil || held == nil {
		t.Fatal(held, err)
	}
	var e api.Error
	code, _ := s.call(t, http.MethodPost, api.PathCancel+"?ns="+ns+"&name=web", nil, &e)
	if code != http.StatusConflict || !strings.Contains(e.Error, "a running uninstall cannot be cancelled") {
		t.Errorf("cancel of a running uninstall: %d %q, want 409", code, e.Error)
	}
	l, err := cluster.Client.CoordinationV1().Leases(ns).Get(context.Background(), release.LeaseName("web", 1), metav1.GetOptions{})
	if err != nil || l.Annotations[lease.AnnotationCancel] != "" {
		t.Errorf("lease after a refused cancel: %v, %v", l.Annotations, err)
	}
}

// A tenant who may write Secrets but not get Secret x cannot make submit send x's
// contents to a server of the tenant's choosing through a ProjectHelmChartRepository:
// the install is refused (403) before anything is fetched. With get on x it goes on.
func TestProjectRepositoryCredentialsOnlyForWhoMayReadThem(t *testing.T) {
	var hits atomic.Int64
	var sent atomic.Value
	exfil := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if u, p, ok := r.BasicAuth(); ok {
			sent.Store(u + ":" + p)
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(exfil.Close)
	s := newStack(t)
	if cluster.Dev.BearerToken == "" {
		t.Skip("the kubeconfig has no dev token (not the local cluster)")
	}
	ns := cluster.Namespace(t)
	ctx := context.Background()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: exfil.Certificate().Raw})
	if _, err := cluster.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ca"},
		Data: map[string]string{chartrepos.KeyCABundle: string(ca)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "x"},
		Data: map[string][]byte{"username": []byte("admin"), "password": []byte("hunter2")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cluster.Admin)
	if err != nil {
		t.Fatal(err)
	}
	repoObj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "helm.openshift.io/v1beta1", "kind": "ProjectHelmChartRepository",
		"metadata": map[string]any{"name": "exfil"},
		"spec": map[string]any{"connectionConfig": map[string]any{"url": exfil.URL,
			"ca": map[string]any{"name": "ca"}, "basicAuthConfig": map[string]any{"name": "x"}}},
	}}
	if _, err := dyn.Resource(chartrepos.ProjectGVR).Namespace(ns).Create(ctx, repoObj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// dev may write Secrets (release records) but not read them.
	writer := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "secret-writer"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create", "update"}}}}
	if _, err := cluster.Client.RbacV1().Roles(ns).Create(ctx, writer, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bind(t, ns, "Role", "secret-writer")
	s.token = cluster.Dev.BearerToken
	req := api.ReleaseRequest{Name: "web", Namespace: ns, IndexEntry: "tiny--exfil", ChartVersion: "0.1.0"}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var e api.Error
		code, _ := s.call(t, http.MethodPost, api.PathAsync, req, &e)
		if code == http.StatusForbidden && strings.Contains(e.Error, "secrets/x") {
			break
		}
		// Until submit's informer sees the repository, the entry names no repository (422).
		if time.Now().After(deadline) {
			t.Fatalf("dev without get on x: %d %q, want 403 naming secrets/x", code, e.Error)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if n := hits.Load(); n != 0 {
		t.Errorf("the tenant's server was contacted %d times (sent %v)", n, sent.Load())
	}
	if n := releaseSecrets(t, ns); n != 0 {
		t.Errorf("%d release secrets after a refused install", n)
	}
}

// bind binds a Role or ClusterRole to dev in ns and waits until the API server's RBAC
// authorizer allows creating Secrets there.
func bind(t *testing.T, ns, kind, name string) {
	t.Helper()
	_, err := cluster.Client.RbacV1().RoleBindings(ns).Create(context.Background(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "dev-" + name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: kind, Name: name},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: "dev", APIGroup: "rbac.authorization.k8s.io"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitAllowed(t, ns)
}
