package kube

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
)

// The clients are built without contacting the cluster, with QPS limits raised so the
// path to 201 does not wait on client-go's default of 5 requests/s.
func TestFromConfig(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	c, err := FromConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c.Config.QPS != 500 || c.Config.Burst != 1000 || c.Typed == nil || c.Metadata == nil {
		t.Errorf("clients %+v", c.Config)
	}
}

func TestOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	kubeconfig := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Config.Host != "https://127.0.0.1:1" || c.Config.BearerToken != "t" || c.Config.QPS != 500 {
		t.Errorf("config %+v", c.Config)
	}
	if _, err := Open(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing kubeconfig opened")
	}
}

// Submit's clients have no client-side bucket: at 400 requests/s (800 creates/s) a 500/s
// bucket queued the path to 201 in front of an API server that had room.
func TestUnlimited(t *testing.T) {
	c, err := FromConfigWithLimits(&rest.Config{Host: "https://127.0.0.1:1"}, Unlimited)
	if err != nil {
		t.Fatal(err)
	}
	if rl := c.Typed.CoreV1().RESTClient().GetRateLimiter(); rl != nil {
		t.Errorf("secrets client has a rate limiter %T", rl)
	}
	if rl := c.Typed.CoordinationV1().RESTClient().GetRateLimiter(); rl != nil {
		t.Errorf("leases client has a rate limiter %T", rl)
	}
	raised, err := FromConfig(&rest.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if rl := raised.Typed.CoreV1().RESTClient().GetRateLimiter(); rl == nil || rl.QPS() != 500 {
		t.Errorf("raised client's limiter %v", rl)
	}
}
