package source

import (
	"context"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/repo"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// A private chart repository: HTTPS with its own CA, basic auth. Its credentials come from
// a Secret in the cluster, as an operator would configure them.
func TestPrivateRepositoryWithCredentialsFromASecret(t *testing.T) {
	client := fake.NewSimpleClientset()     // only Secrets are read
	root := filepath.Join("..", "..", "..") // the repository
	dir := t.TempDir()
	ch, err := loader.LoadDir(filepath.Join(root, "testdata", "charts", "tiny"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chartutil.Save(ch, dir); err != nil {
		t.Fatal(err)
	}
	files := http.FileServer(http.Dir(dir))
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "reader" || p != "s3cret" {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		files.ServeHTTP(w, r)
	}))
	defer srv.Close()
	idx, err := repo.IndexDirectory(dir, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if err := idx.WriteFile(filepath.Join(dir, "index.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}

	ns := "private"
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	_, err = client.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "private-repo"},
		Data:       map[string][]byte{"username": []byte("reader"), "password": []byte("s3cret"), "ca.crt": ca},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	settings := Settings{ChartRepositories: "private=" + srv.URL, ChartRepositorySecrets: map[string]string{"private": "private-repo"},
		ChartSecretsNamespace: ns, AllowLoopbackCharts: true}
	src, err := settings.NewSource(context.Background(), client, time.Minute, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []Ref{{IndexEntry: "tiny--private", Version: "0.1.0", Namespace: ns}, {URL: srv.URL + "/tiny-0.1.0.tgz", Namespace: ns}} {
		c, err := src.Get(context.Background(), ref)
		if err != nil || c.Loaded.Metadata.Name != "tiny" {
			t.Fatalf("%v with credentials: %v", ref, err)
		}
	}
	// Named without a namespace (no access review behind it), the chart gets no password.
	if _, err := src.Get(context.Background(), Ref{URL: srv.URL + "/tiny-0.1.0.tgz"}); !errors.Is(err, ErrUnreachable) {
		t.Errorf("without a namespace: %v, want unreachable (401)", err)
	}

	// Without the Secret: the CA is unknown (TLS fails); with the CA but no password: 401.
	bare, err := Settings{ChartRepositories: "private=" + srv.URL, AllowLoopbackCharts: true}.NewSource(context.Background(), client, time.Minute, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bare.Get(context.Background(), Ref{IndexEntry: "tiny--private", Version: "0.1.0"}); !errors.Is(err, ErrUnreachable) {
		t.Errorf("without credentials: %v, want unreachable", err)
	}
	caOnly := &Source{Repositories: map[string]string{"private": srv.URL}, Credentials: map[string]Credentials{"private": {CA: ca}},
		HTTP: Policy{AllowLoopback: true}.HTTPClient(10 * time.Second)}
	if _, err := caOnly.Get(context.Background(), Ref{IndexEntry: "tiny--private", Version: "0.1.0", Namespace: ns}); !errors.Is(err, ErrUnreachable) {
		t.Errorf("without the password: %v, want unreachable (401)", err)
	}
	if _, err := LoadCredentials(context.Background(), client, ns, map[string]string{"x": "missing"}); err == nil {
		t.Error("a missing Secret was not reported")
	}

}
