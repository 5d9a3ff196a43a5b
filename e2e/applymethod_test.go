package e2e

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/release"
)

// `oc helm install --server-side` and `upgrade --server-side=auto` on the Helm v4 engine
// apply server-side: each record says apply_method ssa, as Helm v4 writes it.
func TestOcHelmServerSideFlags(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	s := newStackEnv(t, stackEnv{Submit: map[string]string{"MAX_QUEUED": "1000000"}, Executor: map[string]string{"HELM_ENGINE": "v4"}}, ns)
	chart := s.charts.ChartURL("tiny", "0.1.0")
	if out, code := s.ocHelm(t, "-n", ns, "install", "web", chart, "--server-side"); code != 0 {
		t.Fatalf("install --server-side: exit %d\n%s", code, out)
	}
	waitStatus(t, s, ns, "web", "deployed", time.Minute)
	if out, code := s.ocHelm(t, "-n", ns, "upgrade", "web", "--set", "message=two", "--server-side=auto", "--force-conflicts"); code != 0 {
		t.Fatalf("upgrade --server-side=auto: exit %d\n%s", code, out)
	}
	// The 201 came after revision 2's reservation: the latest is 2 from here on.
	waitStatus(t, s, ns, "web", "deployed", time.Minute)
	for v := 1; v <= 2; v++ {
		if m := applyMethod(t, ns, v); m != "ssa" {
			t.Errorf("revision %d: apply_method %q, want ssa", v, m)
		}
	}
}

// applyMethod is the apply_method of revision v of web ("" when it has none or is not there).
func applyMethod(t *testing.T, ns string, v int) string {
	t.Helper()
	sec, err := cluster.Client.CoreV1().Secrets(ns).Get(context.Background(), release.SecretName("web", v), metav1.GetOptions{})
	if err != nil {
		return ""
	}
	var r struct {
		ApplyMethod string `json:"apply_method"`
	}
	if err := release.DecodeInto(sec.Data["release"], &r); err != nil {
		t.Fatal(err)
	}
	return r.ApplyMethod
}
