package e2e

import (
	"bytes"
	"context"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/testcharts"
	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/release"
)

// upstreamOcHelm is the unmodified oc-helm plugin (github.com/redhat-developer/oc-helm,
// module github.com/redhat-cop/oc-helm): OC_HELM_UPSTREAM names a binary built elsewhere
// (say from the upstream go.mod), else it is built from third_party/oc-helm, the upstream
// source as published, resolved against this module's Helm and Kubernetes versions
// (third_party/README.md). The Go module proxy does not serve that module.
func upstreamOcHelm(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("OC_HELM_UPSTREAM"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "oc-helm-upstream")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join(root, "third_party", "oc-helm")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the unmodified oc-helm: %v\n%s", err, out)
	}
	return bin
}

// upstreamRunner runs the unmodified oc-helm against submit behind consoleFront, in ns.
func upstreamRunner(t *testing.T, s *stack, ns string) func(args ...string) (string, int) {
	t.Helper()
	bin := upstreamOcHelm(t)
	host := consoleFront(t, s)
	return func(args ...string) (string, int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append(args, "--console-hostname", host, "--token", cluster.Operator.BearerToken,
			"--apiserver", "https://unused.invalid", "-n", ns)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		t.Logf("oc-helm %s: exit %d\n%s", strings.Join(args, " "), code, out.String())
		return out.String(), code
	}
}

// consoleFront serves submit over TLS, as the unmodified oc-helm reaches the console
// (https://<console-hostname>, its session cookie and CSRF double submit); it answers the
// hostname to pass as --console-hostname.
func consoleFront(t *testing.T, s *stack) string {
	t.Helper()
	target, err := url.Parse(s.submit.URL)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewTLSServer(httputil.NewSingleHostReverseProxy(target))
	t.Cleanup(front.Close)
	return strings.TrimPrefix(front.URL, "https://")
}

// A chart by URL outside every repository, behind basic auth, through the whole product:
// submit reads the Secret after the caller's review, the executor fetches with it as the
// caller, Helm stores the console's annotations, an upgrade by chart_url reuses the
// recorded Secret, and __none__ clears it.
func TestNoRepoBasicAuthInstallAndUpgrade(t *testing.T) {
	ns := cluster.Namespace(t)
	s := newStack(t, ns)
	charts := testcharts.StartBasicAuth(t, "chartuser", "s3cret")
	ctx := context.Background()
	if _, err := cluster.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "chart-auth"},
		Data: map[string][]byte{"username": []byte("chartuser"), "password": []byte("s3cret")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tiny := charts.ChartURL("tiny", "0.1.0")
	if _, err := s.client.Install(ctx, api.ReleaseRequest{Name: "web", Namespace: ns, ChartURL: tiny, NoRepo: true,
		BasicAuthSecretName: "chart-auth"}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, s, ns, "web", "deployed", time.Minute)
	annotations := func() map[string]string {
		rel, err := s.client.Get(ctx, ns, "web")
		if err != nil {
			t.Fatal(err)
		}
		return rel.Chart.Metadata.Annotations
	}
	want := map[string]string{release.AnnotationChartURL: tiny, release.AnnotationInstallation: release.InstallationURL, release.AnnotationAuthSecret: "chart-auth"}
	for k, v := range want {
		if got := annotations()[k]; got != v {
			t.Errorf("installed: annotation %s = %q, want %q", k, got, v)
		}
	}
	// An upgrade by chart_url that names no Secret fetches with the recorded one.
	if _, err := s.client.Upgrade(ctx, api.ReleaseRequest{Name: "web", Namespace: ns, ChartURL: tiny}); err != nil {
		t.Fatalf("upgrade reusing the recorded Secret: %v", err)
	}
	waitStatus(t, s, ns, "web", "deployed", time.Minute)
	if got := annotations()[release.AnnotationAuthSecret]; got != "chart-auth" {
		t.Errorf("upgraded: auth-secret annotation %q, want chart-auth kept", got)
	}
	// __none__ clears it: the server's 401, nothing reserved.
	_, err := s.client.Upgrade(ctx, api.ReleaseRequest{Name: "web", Namespace: ns, ChartURL: tiny, BasicAuthSecretName: "__none__"})
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("upgrade with __none__: %v, want the chart server's 401", err)
	}
	rel, err := s.client.Get(ctx, ns, "web")
	if err != nil || rel.Version != 2 {
		t.Errorf("after the refused upgrade: revision %v %v, want 2", rel, err)
	}
}
