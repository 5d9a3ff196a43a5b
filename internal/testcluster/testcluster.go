// Package testcluster gives integration tests a real Kubernetes API server: the one
// KUBECONFIG names, or the project's local cluster (started on first use), with a fresh
// namespace per test.
package testcluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/async-helm/async-helm/internal/knativeapply"
	"github.com/async-helm/async-helm/internal/operator"
	"github.com/async-helm/async-helm/internal/podprofile"
)

// Env is one cluster and its two identities.
type Env struct {
	Kubeconfig string
	Admin      *rest.Config
	// Dev is an ordinary user with no rights beyond what a test grants it.
	Dev *rest.Config
	// Operator is a ServiceAccount bound to cluster-admin: the identity to call submit
	// with, which refuses Admin (a member of system:masters).
	Operator *rest.Config
	Client   kubernetes.Interface
}

// OwnNamespace is async-helm's own namespace (ASYNC_HELM_NAMESPACE's default).
const OwnNamespace = "async-helm"

// NoClusterEnv, set by `make test-unit`, makes Start fail instead of starting a cluster.
const NoClusterEnv = "ASYNC_HELM_NO_CLUSTER"

// Start returns the cluster of KUBECONFIG, or brings up the local one (`make cluster-up`).
// Call it once from TestMain.
func Start() (*Env, error) {
	if os.Getenv(NoClusterEnv) != "" {
		return nil, fmt.Errorf("%s is set (make test-unit): this test needs a cluster and must not be part of the unit tests", NoClusterEnv)
	}
	path := os.Getenv("KUBECONFIG")
	if path == "" {
		root, err := RepoRoot()
		if err != nil {
			return nil, err
		}
		cmd := exec.Command("make", "-s", "cluster-up")
		cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("make cluster-up: %w", err)
		}
		path = filepath.Join(root, ".cache", "localcluster", "kubeconfig")
	}
	load := func(context string) (*rest.Config, error) {
		return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: path},
			&clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	}
	admin, err := load("")
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	admin.QPS, admin.Burst = 500, 1000
	dev, err := load("dev")
	if err != nil {
		// A kubeconfig without the local cluster's dev context: act as dev by impersonation.
		dev = rest.CopyConfig(admin)
		dev.Impersonate = rest.ImpersonationConfig{UserName: "dev", Groups: []string{"developers", "system:authenticated"}}
	}
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The chart repository CRDs the console's routes read (OpenShift serves them; a plain
	// cluster gets them here, idempotently).
	if err := knativeapply.InstallRepositoryCRDs(ctx, admin); err != nil {
		return nil, err
	}
	// async-helm's own namespace (make run and a deployment have it): submit binds each
	// accepted request there, the executor checks it.
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: OwnNamespace}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("namespace %s: %w", OwnNamespace, err)
	}
	token, err := operator.Token(ctx, cs, 6*time.Hour)
	if err != nil {
		return nil, err
	}
	op := rest.AnonymousClientConfig(admin)
	op.BearerToken = token
	return &Env{Kubeconfig: path, Admin: admin, Dev: dev, Operator: op, Client: cs}, nil
}

// MustStart is Start for TestMain: it exits the test binary when no cluster can be had.
func MustStart() *Env {
	env, err := Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "no test cluster:", err)
		os.Exit(1)
	}
	return env
}

// RepoRoot is the directory of the product's go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/async-helm/async-helm\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("go.mod of github.com/async-helm/async-helm not found above the working directory")
		}
		dir = parent
	}
}

// Namespace creates a fresh namespace for the test and deletes it afterwards.
func (e *Env) Namespace(t testing.TB) string {
	return e.namespace(t, nil)
}

// SlowNamespace is a namespace whose pods become Ready only after the local cluster's
// slow delay (60 s by default), as a big chart's pods do on a real cluster.
func (e *Env) SlowNamespace(t testing.TB) string {
	return e.namespace(t, podprofile.Slow.Annotations())
}

// GitLabNamespace runs the local cluster's "gitlab" pod profile (podprofile.GitLab): GitLab's
// workloads become ready staggered, so an install takes minutes and progress moves.
func (e *Env) GitLabNamespace(t testing.TB) string {
	return e.namespace(t, podprofile.GitLab.Annotations())
}

func (e *Env) namespace(t testing.TB, annotations map[string]string) string {
	t.Helper()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	name := strings.ToLower(fmt.Sprintf("t-%s-%s", sanitize(t.Name()), hex.EncodeToString(b)))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := e.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations, Labels: map[string]string{"async-helm.io/test": "true"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	// Pods need the namespace's default ServiceAccount, which a controller creates.
	for {
		if _, err := e.Client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("namespace %s: default ServiceAccount never appeared", name)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Cleanup(func() {
		if os.Getenv("KEEP_NAMESPACES") != "" {
			return
		}
		_ = e.Client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else if b.Len() > 0 && !strings.HasSuffix(b.String(), "-") {
			b.WriteByte('-')
		}
		if b.Len() >= 40 {
			break
		}
	}
	return strings.Trim(b.String(), "-")
}

// WaitDevAllowed waits until dev may verb resource (of group) in ns: the API server's RBAC
// authorizer sees a new binding through its informer, a moment later (a 403 right after a
// grant was seen under load).
func (e *Env) WaitDevAllowed(t testing.TB, ns, verb, resource, group string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		sar, err := e.Client.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: "dev", Groups: []string{"developers"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Resource: resource, Group: group}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("dev may not %s %s in %s 30 s after the binding", verb, resource, ns)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
