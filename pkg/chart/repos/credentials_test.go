package repos

import (
	"context"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/repo"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
)

// secretX is the Secret a tenant's project repository names: its basic auth.
func secretX(password string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "x"},
		Data: map[string][]byte{KeyUsername: []byte("admin"), KeyPassword: []byte(password)}}
}

// callerSet is the executor's view: a project repository "exfil" of namespace team naming
// Secret x, over a server that records what it is sent, with project credentials checked
// against the caller's own reads (callerKube answers them).
func callerSet(t *testing.T, callerKube *fake.Clientset) (*authServer, *chartsource.Source, *[]chartsource.Caller) {
	t.Helper()
	exfil := newAuthServer(t)
	objs := []runtime.Object{repoObject("ProjectHelmChartRepository", "team", "exfil", exfil.URL, false,
		map[string]string{"basicAuthConfig": "x", "ca": "ca"})}
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: exfil.Certificate().Raw})
	var asked []chartsource.Caller
	s := startSetAnd(t, nil, nil, objs, []runtime.Object{cm("team", "ca", KeyCABundle, string(ca)), secretX("hunter2")}, func(s *Set) {
		checked := CallerChecked{Set: s, AsCaller: func(c chartsource.Caller) (kubernetes.Interface, error) {
			asked = append(asked, c)
			return callerKube, nil
		}}
		s.Source.Repos, s.Source.Checker, s.Source.AuthSecrets = checked, checked, checked
	})
	return exfil, s.Source, &asked
}

var alice = chartsource.Caller{User: "alice", UID: "u-1", Groups: []string{"team-devs"}}

// A chart URL that matched no repository at submit; while it
// queues, the tenant creates a project repository under it naming Secret x, which alice
// may not read. The executor's fetch fails naming x and never contacts the server.
func TestExecutorFetchRefusesProjectSecretsTheCallerCannotRead(t *testing.T) {
	callerKube := fake.NewSimpleClientset(secretX("hunter2"))
	callerKube.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "x", errors.New("alice may not"))
	})
	exfil, src, asked := callerSet(t, callerKube)
	ctx := chartsource.WithCaller(context.Background(), alice)
	_, err := src.Get(ctx, chartsource.Ref{URL: exfil.URL + "/x.tgz", Namespace: "team"})
	if err == nil || !strings.Contains(err.Error(), "Secret team/x") || !strings.Contains(err.Error(), `"alice"`) {
		t.Fatalf("fetch error %v, want a refusal naming Secret team/x and the caller", err)
	}
	if n := exfil.requests.Load(); n != 0 {
		t.Errorf("the tenant's server was contacted %d times (sent %v)", n, exfil.sent.Load())
	}
	if len(*asked) == 0 || (*asked)[0].User != "alice" || (*asked)[0].UID != "u-1" || (*asked)[0].Groups[0] != "team-devs" {
		t.Errorf("the Secret was read as %+v, want alice", *asked)
	}
}

// A caller who may read the Secret gets the fetch with its credentials.
func TestExecutorFetchSendsProjectSecretsTheCallerReads(t *testing.T) {
	exfil, src, _ := callerSet(t, fake.NewSimpleClientset(secretX("hunter2")))
	ctx := chartsource.WithCaller(context.Background(), alice)
	_, err := src.Get(ctx, chartsource.Ref{URL: exfil.URL + "/x.tgz", Namespace: "team"})
	if !errors.Is(err, chartsource.ErrNotFound) { // the server answers 404 to everything
		t.Fatalf("fetch error %v, want the server's 404", err)
	}
	if got := exfil.sent.Load(); got != "admin:hunter2" {
		t.Errorf("the server was sent %v, want the repository's basic auth", got)
	}
}

// Without a caller in the context, or when what the caller reads is not what would be sent
// (the Secret changed after the repository was resolved), nothing is sent.
func TestExecutorFetchRefusesUncheckedProjectSecrets(t *testing.T) {
	for name, tc := range map[string]struct {
		ctx        context.Context
		callerKube *fake.Clientset
		want       string
	}{
		"no caller":   {context.Background(), fake.NewSimpleClientset(secretX("hunter2")), "no caller"},
		"other value": {chartsource.WithCaller(context.Background(), alice), fake.NewSimpleClientset(secretX("changed")), "changed while fetching"},
	} {
		t.Run(name, func(t *testing.T) {
			exfil, src, _ := callerSet(t, tc.callerKube)
			_, err := src.Get(tc.ctx, chartsource.Ref{URL: exfil.URL + "/x.tgz", Namespace: "team"})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("fetch error %v, want %q", err, tc.want)
			}
			if n := exfil.requests.Load(); n != 0 {
				t.Errorf("the server was contacted %d times (sent %v)", n, exfil.sent.Load())
			}
		})
	}
}

// CHART_REPOSITORY_SECRETS are the administrators': sent as configured, whoever the caller,
// without reading anything as the caller.
func TestExecutorFetchSendsAdministratorCredentials(t *testing.T) {
	srv := newAuthServer(t)
	s := startSetAnd(t, map[string]string{"admin": srv.URL},
		map[string]chartsource.Credentials{"admin": {Username: "ops", Password: "pw"}}, nil, nil, func(s *Set) {
			s.Source.HTTP = srv.Client()
			checked := CallerChecked{Set: s, AsCaller: func(chartsource.Caller) (kubernetes.Interface, error) {
				t.Error("an administrator's credentials were read as the caller")
				return fake.NewSimpleClientset(), nil
			}}
			s.Source.Repos, s.Source.Checker = checked, checked
		})
	ctx := chartsource.WithCaller(context.Background(), alice)
	if _, err := s.Source.Get(ctx, chartsource.Ref{URL: srv.URL + "/x.tgz", Namespace: "team"}); !errors.Is(err, chartsource.ErrNotFound) {
		t.Fatalf("fetch error %v, want the server's 404", err)
	}
	if got := srv.sent.Load(); got != "ops:pw" {
		t.Errorf("the server was sent %v, want the administrator's basic auth", got)
	}
}

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
	settings := chartsource.Settings{ChartRepositories: "private=" + srv.URL, ChartRepositorySecrets: map[string]string{"private": "private-repo"},
		ChartSecretsNamespace: ns, AllowLoopbackCharts: true}
	src, err := NewSource(context.Background(), settings, client, time.Minute, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []chartsource.Ref{{IndexEntry: "tiny--private", Version: "0.1.0", Namespace: ns}, {URL: srv.URL + "/tiny-0.1.0.tgz", Namespace: ns}} {
		c, err := src.Get(context.Background(), ref)
		if err != nil || c.Loaded.Metadata.Name != "tiny" {
			t.Fatalf("%v with credentials: %v", ref, err)
		}
	}
	// Named without a namespace (no access review behind it), the chart gets no password.
	if _, err := src.Get(context.Background(), chartsource.Ref{URL: srv.URL + "/tiny-0.1.0.tgz"}); !errors.Is(err, chartsource.ErrUnreachable) {
		t.Errorf("without a namespace: %v, want unreachable (401)", err)
	}

	// Without the Secret: the CA is unknown (TLS fails); with the CA but no password: 401.
	bare, err := NewSource(context.Background(), chartsource.Settings{ChartRepositories: "private=" + srv.URL, AllowLoopbackCharts: true}, client, time.Minute, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bare.Get(context.Background(), chartsource.Ref{IndexEntry: "tiny--private", Version: "0.1.0"}); !errors.Is(err, chartsource.ErrUnreachable) {
		t.Errorf("without credentials: %v, want unreachable", err)
	}
	caOnly := &chartsource.Source{Repositories: map[string]string{"private": srv.URL}, Credentials: map[string]chartsource.Credentials{"private": {CA: ca}},
		HTTP: chartsource.Policy{AllowLoopback: true}.HTTPClient(10 * time.Second)}
	if _, err := caOnly.Get(context.Background(), chartsource.Ref{IndexEntry: "tiny--private", Version: "0.1.0", Namespace: ns}); !errors.Is(err, chartsource.ErrUnreachable) {
		t.Errorf("without the password: %v, want unreachable (401)", err)
	}
	if _, err := LoadCredentials(context.Background(), client, ns, map[string]string{"x": "missing"}); err == nil {
		t.Error("a missing Secret was not reported")
	}
}
