package knative

import (
	"context"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/async-helm/async-helm/internal/satoken"
	"github.com/async-helm/async-helm/pkg/signing"
)

// executor and notifier take events only from the Broker: Knative must not expose them
// outside the cluster, where anyone could post to them.
func TestExecutorAndNotifierAreClusterLocal(t *testing.T) {
	seen := map[string]bool{}
	for _, u := range manifests(t) {
		if u.GetKind() != "Service" || u.GetAPIVersion() != "serving.knative.dev/v1" {
			continue
		}
		local := u.GetLabels()["networking.knative.dev/visibility"] == "cluster-local"
		switch u.GetName() {
		case "executor", "notifier":
			seen[u.GetName()] = true
			if !local {
				t.Errorf("Knative Service %s lacks the label networking.knative.dev/visibility: cluster-local", u.GetName())
			}
		}
	}
	if !seen["executor"] || !seen["notifier"] {
		t.Fatalf("executor and notifier Services not found: %v", seen)
	}
}

// No key ships in the manifests (make deploy creates a random one), and every function
// reads the Secret it will be in: each refuses to start without it.
func TestNoSigningKeyShipsAndEveryFunctionReadsTheSecret(t *testing.T) {
	services := 0
	for _, u := range manifests(t) {
		if u.GetKind() == "Secret" {
			for _, field := range []string{"data", "stringData"} {
				m, _, _ := unstructured.NestedStringMap(u.Object, field)
				if _, ok := m["EVENT_SIGNING_KEY"]; ok {
					t.Errorf("Secret %s ships an EVENT_SIGNING_KEY", u.GetName())
				}
				for _, v := range m {
					if strings.Contains(v, signing.PlaceholderKey) {
						t.Errorf("Secret %s holds the placeholder key", u.GetName())
					}
				}
			}
		}
		if u.GetKind() != "Service" || u.GetAPIVersion() != "serving.knative.dev/v1" {
			continue
		}
		services++
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		found := false
		for _, c := range containers {
			envFrom, _, _ := unstructured.NestedSlice(c.(map[string]any), "envFrom")
			for _, e := range envFrom {
				if name, _, _ := unstructured.NestedString(e.(map[string]any), "secretRef", "name"); name == "async-helm-events" {
					found = true
				}
			}
		}
		if !found {
			t.Errorf("Knative Service %s does not read the Secret async-helm-events", u.GetName())
		}
	}
	if services != 3 {
		t.Fatalf("%d Knative Services, want 3", services)
	}
}

// actingAs is a client that authenticates with a real token of the ServiceAccount
// (TokenRequest), not an admin impersonating it: impersonation rules are then really checked.
func actingAs(t *testing.T, ns, sa string, imp rest.ImpersonationConfig) kubernetes.Interface {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	token, err := satoken.Request(ctx, cluster.Client, ns, sa, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cfg := satoken.Config(cluster.Admin, token)
	cfg.Impersonate = imp
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// whoAmI is the identity the API server sees for cs (SelfSubjectReview).
func whoAmI(t *testing.T, cs kubernetes.Interface) (authnv1.UserInfo, error) {
	t.Helper()
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return authnv1.UserInfo{}, err
	}
	return r.Status.UserInfo, nil
}

// A pipeline runs as a ServiceAccount whose token is bound to its pod: the executor must be
// allowed to impersonate it with every extra that token carries.
func TestExecutorImpersonatesPodBoundServiceAccountTokens(t *testing.T) {
	applyRBAC(t)
	ctx := context.Background()
	ns := cluster.Namespace(t)
	token, err := satoken.ForPod(ctx, cluster.Client, ns, "pipeline")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cluster.Client.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil || !tr.Status.Authenticated {
		t.Fatalf("token review of the bound token: %v %+v", err, tr.Status)
	}
	caller := tr.Status.User
	for _, k := range []string{"pod-name", "pod-uid", "node-name", "node-uid", "credential-id"} {
		if len(caller.Extra["authentication.kubernetes.io/"+k]) == 0 {
			t.Fatalf("the bound token lacks the extra authentication.kubernetes.io/%s: %v", k, caller.Extra)
		}
	}
	extra := map[string][]string{}
	for k, v := range caller.Extra {
		extra[k] = v
	}
	executor := actingAs(t, "async-helm", "executor", rest.ImpersonationConfig{UserName: caller.Username, UID: caller.UID, Groups: caller.Groups, Extra: extra})
	got, err := whoAmI(t, executor)
	if err != nil {
		t.Fatalf("executor impersonating %s with its token's extras: %v", caller.Username, err)
	}
	if got.Username != caller.Username || got.UID != caller.UID || len(got.Extra) != len(caller.Extra) {
		t.Fatalf("impersonated identity %+v, want %+v", got, caller)
	}
}
