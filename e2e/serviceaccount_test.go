package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/async-helm/async-helm/internal/satoken"
	"github.com/async-helm/async-helm/internal/testcharts"
	"github.com/async-helm/async-helm/internal/testcluster"
	"github.com/async-helm/async-helm/internal/testsink"
	"github.com/async-helm/async-helm/internal/teststack"
	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release/lease"
	"github.com/async-helm/async-helm/pkg/submitclient"
)

// applyShippedRBAC applies config/knative's namespace, ServiceAccounts and RBAC, so the
// executor below has exactly the rights a deployment gives it.
func applyShippedRBAC(t *testing.T) {
	t.Helper()
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dc, err := dynamic.NewForConfig(cluster.Admin)
	if err != nil {
		t.Fatal(err)
	}
	resources := map[string]string{"Namespace": "namespaces", "ServiceAccount": "serviceaccounts",
		"ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings", "Role": "roles", "RoleBinding": "rolebindings"}
	for _, f := range []string{"100-namespace.yaml", "300-rbac.yaml"} {
		raw, err := os.ReadFile(filepath.Join(root, "config", "knative", f))
		if err != nil {
			t.Fatal(err)
		}
		d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
		for {
			var u unstructured.Unstructured
			if err := d.Decode(&u.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			gvr := u.GroupVersionKind().GroupVersion().WithResource(resources[u.GetKind()])
			var ri dynamic.ResourceInterface = dc.Resource(gvr)
			if u.GetNamespace() != "" {
				ri = dc.Resource(gvr).Namespace(u.GetNamespace())
			}
			body, _ := json.Marshal(u.Object)
			force := true
			if _, err := ri.Patch(context.Background(), u.GetName(), types.ApplyPatchType, body,
				metav1.PatchOptions{FieldManager: "async-helm-test", Force: &force}); err != nil {
				t.Fatalf("apply %s %s: %v", u.GetKind(), u.GetName(), err)
			}
		}
	}
}

// serviceAccountKubeconfig writes a kubeconfig that authenticates as the ServiceAccount
// ns/sa with a token of its own.
func serviceAccountKubeconfig(t *testing.T, ns, sa string) string {
	t.Helper()
	token, err := satoken.Request(context.Background(), cluster.Client, ns, sa, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ca := cluster.Admin.CAData
	if len(ca) == 0 && cluster.Admin.CAFile != "" {
		if ca, err = os.ReadFile(cluster.Admin.CAFile); err != nil {
			t.Fatal(err)
		}
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: cluster.Admin.Host, CertificateAuthorityData: ca, InsecureSkipTLSVerify: cluster.Admin.Insecure}
	cfg.AuthInfos["sa"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["sa"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "sa"}
	cfg.CurrentContext = "sa"
	path := filepath.Join(t.TempDir(), sa+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// A pipeline (Tekton runs each step as a ServiceAccount, with a token bound to its pod)
// installs through async-helm: within its namespace Role the install is deployed; a chart
// that needs more (a ClusterRole) ends failed with the Forbidden reason. The executor runs
// with its own ServiceAccount and the shipped RBAC, so its right to impersonate such a
// caller (with all the extras of a bound token) is what is tested.
func TestServiceAccountCallerWithABoundToken(t *testing.T) {
	t.Parallel()
	applyShippedRBAC(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ns := cluster.Namespace(t)
	_, err := cluster.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "pipeline"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = cluster.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "pipeline"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pipeline"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "pipeline"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	token, err := satoken.ForPod(ctx, cluster.Client, ns, "pipeline")
	if err != nil {
		t.Fatal(err)
	}

	charts := testcharts.Start(t)
	const key = "serviceaccount-test-signing-key-0123456789"
	sink := testsink.Start(t)
	ports, w := wire(t, sink.URL)
	executor := teststack.RunPort(t, bins["executor"], ports.Executor, map[string]string{"KUBECONFIG": serviceAccountKubeconfig(t, "async-helm", "executor"),
		"ALLOW_LOOPBACK_CHARTS": "true", "EVENT_SIGNING_KEY": key, "POD_NAME": "executor-sa-test"})
	submit := teststack.RunPort(t, bins["submit"], ports.Submit, map[string]string{"KUBECONFIG": cluster.Kubeconfig, "ALLOW_LOOPBACK_CHARTS": "true",
		"K_SINK": w.BrokerURL, "EVENT_SIGNING_KEY": key})
	notifier := teststack.RunPort(t, bins["notifier"], ports.Notifier, map[string]string{"KUBECONFIG": serviceAccountKubeconfig(t, "async-helm", "notifier"),
		"K_SINK": w.BrokerURL, "EVENT_SIGNING_KEY": key, "NAMESPACES": ns})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("submit log:\n%s\nexecutor log:\n%s\nnotifier log:\n%s", tail(submit.Output()), tail(executor.Output()), tail(notifier.Output()))
		}
	})
	client := &submitclient.Client{Server: submit.URL, Token: token}
	final := func(name string) (status, reason string) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for time.Now().Before(deadline) {
			rel, err := client.Get(ctx, ns, name)
			if err == nil && rel.Info != nil && !strings.HasPrefix(rel.Info.Status.String(), "pending") {
				return rel.Info.Status.String(), rel.Info.Description
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Fatalf("release %s never left pending", name)
		return "", ""
	}

	if _, err := client.Install(ctx, api.ReleaseRequest{Name: "app", Namespace: ns, ChartURL: charts.ChartURL("tiny", "0.1.0")}); err != nil {
		t.Fatalf("install by the pipeline: %v", err)
	}
	if st, reason := final("app"); st != "deployed" {
		t.Fatalf("the pipeline's install within its Role: %s %q, want deployed", st, reason)
	}
	if _, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, "app-config", metav1.GetOptions{}); err != nil {
		t.Errorf("the chart's ConfigMap: %v", err)
	}

	if _, err := client.Install(ctx, api.ReleaseRequest{Name: "cr", Namespace: ns, ChartURL: charts.ChartURL("clusterrole", "0.1.0")}); err != nil {
		t.Fatalf("install of a chart beyond the Role: %v", err)
	}
	st, reason := final("cr")
	if st != "failed" || !strings.Contains(reason, "forbidden") || !strings.Contains(reason, `User "system:serviceaccount:`+ns+`:pipeline"`) {
		t.Fatalf("the pipeline's chart with a ClusterRole: %s %q, want failed, forbidden for the pipeline", st, reason)
	}
	if _, err := cluster.Client.RbacV1().ClusterRoles().Get(ctx, ns+"-cr", metav1.GetOptions{}); err == nil {
		t.Error("the pipeline's chart created a ClusterRole")
	}

	// The pipeline uninstalls: the executor's tombstone Lease and the notifier's report and
	// deletion of it work with the shipped rights.
	if err := client.Uninstall(ctx, ns, "app", 0); err != nil {
		t.Fatalf("uninstall by the pipeline: %v", err)
	}
	sink.WaitFor(t, 2*time.Minute, "uninstalled of app", func(e []cloudevents.Event) bool {
		for _, ev := range e {
			if ev.Type() == events.TypeStatusPrefix+events.StatusUninstalled && ev.Subject() == ns+"/app" {
				return true
			}
		}
		return false
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		l, err := cluster.Client.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{LabelSelector: lease.SelectorTombstones})
		if err == nil && len(l.Items) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tombstone was not deleted by the notifier's ServiceAccount: %v, %v", l, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
