package cli

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/async-helm/async-helm/pkg/api"
)

// clusterWithSubmit is a Kubernetes API (https: client-go sends a kubeconfig's token to
// https only) whose Knative Service async-helm/submit has the URL submitURL (else the
// submit's below), and a submit that answers every request 404. It counts the calls.
type clusterWithSubmit struct {
	mu                    sync.Mutex
	ksvcGets, submitCalls int
	tokens                []string
}

func (c *clusterWithSubmit) serve(t *testing.T, submitURL string) (kubeconfig string) {
	t.Helper()
	submit := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.submitCalls++
		c.tokens = append(c.tokens, r.Header.Get("Authorization"))
		c.mu.Unlock()
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(api.Error{Error: "not here"})
	}))
	t.Cleanup(submit.Close)
	if submitURL == "" {
		submitURL = submit.URL
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /apis/serving.knative.dev/v1/namespaces/async-helm/services/submit", func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.ksvcGets++
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"apiVersion": "serving.knative.dev/v1", "kind": "Service",
			"metadata": map[string]any{"name": "submit", "namespace": "async-helm"}, "status": map[string]any{"url": submitURL}})
	})
	cluster := httptest.NewTLSServer(mux)
	t.Cleanup(cluster.Close)
	kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	cfg := "apiVersion: v1\nkind: Config\ncurrent-context: c\n" +
		"clusters:\n- name: c\n  cluster:\n    server: " + cluster.URL + "\n    insecure-skip-tls-verify: true\n" +
		"contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n    namespace: team\n" +
		"users:\n- name: u\n  user:\n    token: kube-token\n"
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}

func runWithKubeconfig(kubeconfig string, args ...string) (string, error) {
	var out bytes.Buffer
	g := &Globals{IO: genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out}, PollInterval: time.Millisecond}
	root := newRootCmd(g)
	root.SetArgs(append(args, "--kubeconfig", kubeconfig))
	err := root.Execute()
	return out.String(), err
}

// Without --server every command finds submit in the cluster (its Run connects first) and
// calls it with the kubeconfig's token.
func TestEveryCommandFindsSubmitInTheCluster(t *testing.T) {
	t.Setenv(EnvServer, "")
	t.Setenv(EnvToken, "")
	for _, args := range []string{"list", "status web", "history web", "cancel web", "logs web", "uninstall web",
		"rollback web", "install web https://charts.example.com/tiny-0.1.0.tgz", "upgrade web"} {
		t.Run(args, func(t *testing.T) {
			c := &clusterWithSubmit{}
			kubeconfig := c.serve(t, "")
			out, err := runWithKubeconfig(kubeconfig, strings.Fields(args)...)
			if err == nil || !strings.Contains(err.Error(), "not here (HTTP 404)") {
				t.Fatalf("error %v, want submit's 404\n%s", err, out)
			}
			if c.ksvcGets != 1 || c.submitCalls != 1 || c.tokens[0] != "Bearer kube-token" {
				t.Errorf("%d Knative Service reads, %d submit calls with %q; want 1, 1 with the kubeconfig's token", c.ksvcGets, c.submitCalls, c.tokens)
			}
		})
	}
}

// Bad input is refused before any call, even the one that finds submit; a found URL the
// network could read the token on is refused before submit is called.
func TestNoCallBeforeValidateAndNoTokenOverHTTP(t *testing.T) {
	t.Setenv(EnvServer, "")
	t.Setenv(EnvToken, "")
	c := &clusterWithSubmit{}
	kubeconfig := c.serve(t, "")
	for _, args := range []string{"list -o xml", "logs web -f -o json", "install web https://x/c.tgz --retries 11", "uninstall web --version -1"} {
		if _, err := runWithKubeconfig(kubeconfig, strings.Fields(args)...); err == nil {
			t.Errorf("%s: no error", args)
		}
	}
	if c.ksvcGets != 0 || c.submitCalls != 0 {
		t.Errorf("bad input: %d Knative Service reads, %d submit calls; want none", c.ksvcGets, c.submitCalls)
	}

	kubeconfig = c.serve(t, "http://submit.async-helm.example.com")
	_, err := runWithKubeconfig(kubeconfig, "list")
	if err == nil || !strings.HasPrefix(err.Error(), "refusing to send your token over plain http to submit.async-helm.example.com") {
		t.Errorf("submit found at a plain http URL: %v", err)
	}
	if c.ksvcGets != 1 || c.submitCalls != 0 {
		t.Errorf("%d Knative Service reads, %d submit calls; want 1, 0", c.ksvcGets, c.submitCalls)
	}
}
