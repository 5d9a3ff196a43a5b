package kube

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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
	c, err := FromConfig(&rest.Config{Host: "https://127.0.0.1:1"}, Unlimited)
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

// The typed clientset speaks protobuf to the API server (client-go's generated clients do
// when the config names no content type): a fraction of JSON's CPU on both sides of every
// create on the path to 201. Setting one on the shared config would turn it off.
func TestTypedClientSpeaksProtobuf(t *testing.T) {
	var gotType, gotAccept string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotType, gotAccept = r.Header.Get("Content-Type"), r.Header.Get("Accept")
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", gotType)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(body) // the create answered with what was sent
	}))
	defer srv.Close()
	c, err := FromConfig(&rest.Config{Host: srv.URL}, Unlimited)
	if err != nil {
		t.Fatal(err)
	}
	in := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}, Data: map[string][]byte{"release": []byte("payload")}}
	out, err := c.Typed.CoreV1().Secrets("ns").Create(context.Background(), in, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if gotType != runtime.ContentTypeProtobuf || !strings.HasPrefix(gotAccept, runtime.ContentTypeProtobuf) {
		t.Errorf("create sent Content-Type %q, Accept %q; want protobuf", gotType, gotAccept)
	}
	if out.Name != "s" || string(out.Data["release"]) != "payload" {
		t.Errorf("decoded %+v", out)
	}
	if c.Config.ContentType != "" {
		t.Errorf("Clients.Config content type %q: the shared config must stay as given", c.Config.ContentType)
	}
}

// No function asks its API server for gzip: the API server gzips the watch streams of a
// client that accepts it (submit's metadata watch of its own reservations), which costs
// CPU on both ends of a connection inside the cluster.
func TestClientsAskForNoGzip(t *testing.T) {
	encodings := make(chan string, 4)
	// TLS, as to a real API server: client-go gives a plain-http config Go's default
	// transport, which asks for gzip whatever the config says.
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		encodings <- r.URL.Path + " Accept-Encoding=" + r.Header.Get("Accept-Encoding")
		http.Error(w, "no", http.StatusNotFound)
	}))
	defer srv.Close()
	c, err := FromConfig(&rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}, Unlimited)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, _ = c.Typed.CoreV1().Secrets("ns").Watch(ctx, metav1.ListOptions{})
	_, _ = c.Metadata.Resource(corev1.SchemeGroupVersion.WithResource("secrets")).Namespace("ns").Watch(ctx, metav1.ListOptions{})
	for range 2 {
		if got := <-encodings; !strings.HasSuffix(got, "Accept-Encoding=") {
			t.Errorf("%s: the client asked for compression", got)
		}
	}
}
