package knative

import (
	"context"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/async-helm/async-helm/internal/operator"
	chartrepos "github.com/async-helm/async-helm/pkg/chart/repos"
	"github.com/async-helm/async-helm/pkg/kube"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
	"github.com/async-helm/async-helm/pkg/release/lease"
)

// applyRBAC creates the namespace, ServiceAccounts and RBAC of 100-/300-*.yaml for real.
func applyRBAC(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	dc, err := dynamic.NewForConfig(cluster.Admin)
	if err != nil {
		t.Fatal(err)
	}
	res := map[string]struct {
		gv, resource string
	}{
		"Namespace": {"v1", "namespaces"}, "ServiceAccount": {"v1", "serviceaccounts"},
		"ClusterRole": {"rbac.authorization.k8s.io/v1", "clusterroles"}, "ClusterRoleBinding": {"rbac.authorization.k8s.io/v1", "clusterrolebindings"},
		"Role": {"rbac.authorization.k8s.io/v1", "roles"}, "RoleBinding": {"rbac.authorization.k8s.io/v1", "rolebindings"},
	}
	want := map[string]bool{}
	for _, u := range manifests(t) {
		want[u.GetKind()+"/"+u.GetName()] = true
	}
	// Prune bindings an older version of these manifests made: the test checks these rules only.
	if crbs, err := cluster.Client.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{}); err == nil {
		for _, b := range crbs.Items {
			// The tests' own operator binding is not ours to prune (e2e runs beside this test).
			if strings.HasPrefix(b.Name, "async-helm-") && !want["ClusterRoleBinding/"+b.Name] && b.Name != operator.Binding {
				_ = cluster.Client.RbacV1().ClusterRoleBindings().Delete(ctx, b.Name, metav1.DeleteOptions{})
			}
		}
	}
	for _, u := range manifests(t) {
		r, ok := res[u.GetKind()]
		if !ok {
			continue
		}
		gvr := u.GroupVersionKind().GroupVersion().WithResource(r.resource)
		var ri dynamic.ResourceInterface = dc.Resource(gvr)
		if u.GetNamespace() != "" {
			ri = dc.Resource(gvr).Namespace(u.GetNamespace())
		}
		if err := apply(ctx, ri, u, false); err != nil {
			t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

// as opens the clients of a function's ServiceAccount (by impersonation).
func as(t *testing.T, sa string) *kube.Clients {
	t.Helper()
	cfg := rest.CopyConfig(cluster.Admin)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:async-helm:" + sa,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:async-helm", "system:authenticated"}}
	cl, err := kube.FromConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func forbidden(t *testing.T, what string, err error) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Errorf("%s: got %v, want Forbidden (least privilege)", what, err)
	}
}

func TestEachFunctionCanMakeItsCallsAndNoMore(t *testing.T) {
	applyRBAC(t)
	ns := cluster.Namespace(t)
	ctx := context.Background()
	meta := &chart.Metadata{Name: "tiny", Version: "0.1.0"}

	// submit: namespace watch, history by metadata, reserve, read, undo.
	submit := as(t, "submit")
	sstore := &release.Store{Client: submit.Typed, Metadata: submit.Metadata}
	_, err := submit.Typed.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	must(t, "submit lists namespaces", err)
	w, err := submit.Typed.CoreV1().Namespaces().Watch(ctx, metav1.ListOptions{})
	must(t, "submit watches namespaces", err)
	w.Stop()
	sec, err := sstore.Reserve(ctx, release.Reservation{Namespace: ns, Name: "r", Action: release.ActionInstall, Chart: meta, RequestID: "x"})
	must(t, "submit reserves", err)
	_, err = sstore.Get(ctx, ns, "r", 1)
	must(t, "submit reads a release", err)
	_, err = submit.Typed.CoreV1().Secrets("").List(ctx, metav1.ListOptions{LabelSelector: "owner=helm"})
	must(t, "submit lists releases in all namespaces", err)
	must(t, "submit undoes a reservation", sstore.Undo(ctx, sec))
	// submit updates its own reservations (the queued label, the stored event) but has no patch.
	_, err = submit.Typed.CoreV1().Secrets(ns).Patch(ctx, "x", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{})
	forbidden(t, "submit patches a secret", err)
	_, err = submit.Typed.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
	forbidden(t, "submit reads leases", err)
	_, err = submit.Typed.CoordinationV1().Leases("async-helm").List(ctx, metav1.ListOptions{LabelSelector: "async-helm.io/ledger=true"})
	must(t, "submit lists its ledger", err)

	// submit: who is the caller, what may they do.
	_, err = submit.Typed.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: "x"}}, metav1.CreateOptions{})
	must(t, "submit reviews a token", err)
	_, err = submit.Typed.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: "dev", ResourceAttributes: &authzv1.ResourceAttributes{Verb: "create", Resource: "secrets", Namespace: ns}}}, metav1.CreateOptions{})
	must(t, "submit reviews access", err)

	// submit and executor: the console's chart repositories and their CA ConfigMaps.
	for _, fn := range []string{"submit", "executor"} {
		cl := as(t, fn)
		dc, err := dynamic.NewForConfig(cl.Config)
		must(t, fn+" dynamic client", err)
		_, err = dc.Resource(chartrepos.ClusterGVR).List(ctx, metav1.ListOptions{})
		must(t, fn+" lists HelmChartRepositories", err)
		pw, err := dc.Resource(chartrepos.ProjectGVR).Namespace("").Watch(ctx, metav1.ListOptions{})
		must(t, fn+" watches ProjectHelmChartRepositories", err)
		pw.Stop()
		if _, err = cl.Typed.CoreV1().ConfigMaps(ns).Get(ctx, "absent", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s reads a CA ConfigMap: %v, want NotFound", fn, err)
		}
	}

	// executor: read the reservation, heartbeat, mark failed / update, impersonate the caller.
	_, err = sstore.Reserve(ctx, release.Reservation{Namespace: ns, Name: "e", Action: release.ActionInstall, Chart: meta, RequestID: "y"})
	must(t, "reserve for the executor", err)
	executor := as(t, "executor")
	estore := &release.Store{Client: executor.Typed, Metadata: executor.Metadata}
	hb := &lease.Heartbeat{Client: executor.Typed, Holder: "rbac-test", Duration: 30 * time.Second}
	held, err := hb.Hold(ctx, ns, release.SecretName("e", 1))
	if held == nil || err != nil {
		t.Fatalf("executor takes a lease: %v %v", held, err)
	}
	_, err = estore.MarkFailed(ctx, ns, "e", 1, "rbac test", false)
	must(t, "executor updates a release", err)
	must(t, "executor releases the lease", held.Release(ctx))
	// executor: records a request's binding and outcome on its consumed record in
	// async-helm's namespace (merge patches).
	cstore := &consumed.Store{Client: executor.Typed, Namespace: "async-helm"}
	reqID := "rbac-" + ns
	_, err = cstore.Consume(ctx, consumed.Record{RequestID: reqID, Namespace: ns, Name: "e", Action: "install", Revision: 1, SecretUID: "uid-rbac", At: time.Now()})
	must(t, "executor binds a request", err)
	must(t, "executor records a request's outcome", cstore.MarkDone(ctx, reqID, "failed"))
	must(t, "executor deletes the test's consumed record",
		executor.Typed.CoordinationV1().Leases("async-helm").Delete(ctx, consumed.LeaseName(reqID), metav1.DeleteOptions{}))
	// Impersonation is checked with the executor's own token (TokenRequest): an admin
	// impersonating the executor may impersonate anyone, which would prove nothing.
	self, err := whoAmI(t, actingAs(t, "async-helm", "executor", rest.ImpersonationConfig{}))
	must(t, "the executor's own identity", err)
	if self.Username != "system:serviceaccount:async-helm:executor" {
		t.Fatalf("acting as %q, want the executor's ServiceAccount", self.Username)
	}
	asDev := actingAs(t, "async-helm", "executor", rest.ImpersonationConfig{UserName: "dev", Groups: []string{"developers"}})
	who, err := whoAmI(t, asDev)
	must(t, "executor impersonates dev", err)
	if who.Username != "dev" {
		t.Errorf("executor impersonating dev is seen as %q", who.Username)
	}
	_, err = asDev.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `User "dev"`) {
		t.Errorf("executor impersonating dev lists configmaps dev may not read: %v, want Forbidden for dev", err)
	}
	_, err = whoAmI(t, actingAs(t, "async-helm", "notifier", rest.ImpersonationConfig{UserName: "dev"}))
	forbidden(t, "notifier impersonates dev", err)
	_, err = executor.Typed.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	forbidden(t, "executor itself lists deployments (charts run as the caller, not as the executor)", err)

	// notifier: metadata list/watch, read a release, record the reported status, read leases, reap.
	notifier := as(t, "notifier")
	_, err = notifier.Metadata.Resource(release.SecretsResource).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm"})
	must(t, "notifier lists release metadata", err)
	mw, err := notifier.Metadata.Resource(release.SecretsResource).Watch(ctx, metav1.ListOptions{LabelSelector: "owner=helm"})
	must(t, "notifier watches release metadata", err)
	mw.Stop()
	nstore := &release.Store{Client: notifier.Typed, Metadata: notifier.Metadata}
	_, err = nstore.Get(ctx, ns, "e", 1)
	must(t, "notifier reads a release", err)
	_, err = notifier.Typed.CoreV1().Secrets(ns).Patch(ctx, release.SecretName("e", 1), types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"async-helm.io/notified":"failed"}}}`), metav1.PatchOptions{})
	must(t, "notifier records a reported status", err)
	_, err = notifier.Typed.CoordinationV1().Leases(ns).Get(ctx, "none", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("notifier reads leases: %v", err)
	}
	_, err = notifier.Typed.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	must(t, "notifier reads whether a namespace is deleted", err)
	_, err = notifier.Typed.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	forbidden(t, "notifier creates a secret", err)
	notifierElects(t, notifier.Typed, ns)
}

// notifierElects: the notifier's pods elect their sweeper on one Lease in async-helm's
// namespace (create, get, update), and may write no other Lease. Dry runs: authorization is
// checked as for real, and a notifier running on this cluster keeps its leadership.
func notifierElects(t *testing.T, cs kubernetes.Interface, tenant string) {
	t.Helper()
	ctx := context.Background()
	dry := []string{metav1.DryRunAll}
	lease := func(name string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	authorized := func(what string, err error) {
		t.Helper()
		// Past authorization: validation, existence and preconditions answer instead.
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsAlreadyExists(err) && !apierrors.IsConflict(err) && !apierrors.IsInvalid(err) {
			t.Errorf("%s: %v", what, err)
		}
	}
	own := cs.CoordinationV1().Leases("async-helm")
	_, err := own.Create(ctx, lease("async-helm-notifier"), metav1.CreateOptions{DryRun: dry})
	authorized("notifier creates its election Lease", err)
	_, err = own.Get(ctx, "async-helm-notifier", metav1.GetOptions{})
	authorized("notifier reads its election Lease", err)
	_, err = own.Update(ctx, lease("async-helm-notifier"), metav1.UpdateOptions{DryRun: dry})
	authorized("notifier renews its election Lease", err)
	_, err = own.Update(ctx, lease("another"), metav1.UpdateOptions{DryRun: dry})
	forbidden(t, "notifier updates another Lease of async-helm", err)
	_, err = cs.CoordinationV1().Leases(tenant).Create(ctx, lease("async-helm-notifier"), metav1.CreateOptions{DryRun: dry})
	forbidden(t, "notifier creates a Lease in a tenant's namespace", err)
	_, err = cs.CoordinationV1().Leases(tenant).Update(ctx, lease("async-helm-notifier"), metav1.UpdateOptions{DryRun: dry})
	forbidden(t, "notifier updates a Lease in a tenant's namespace", err)
}
