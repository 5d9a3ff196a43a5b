package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/testcharts"
	"github.com/async-helm/async-helm/pkg/api"
	chartref "github.com/async-helm/async-helm/pkg/chart/ref"
)

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
	want := map[string]string{chartref.AnnotationChartURL: tiny, chartref.AnnotationInstallation: chartref.InstallationURL, chartref.AnnotationAuthSecret: "chart-auth"}
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
	if got := annotations()[chartref.AnnotationAuthSecret]; got != "chart-auth" {
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
