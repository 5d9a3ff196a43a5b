package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/repo"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/async-helm/async-helm/internal/eventing"
	"github.com/async-helm/async-helm/internal/testchartrepo"
	"github.com/async-helm/async-helm/internal/testcharts"
	"github.com/async-helm/async-helm/internal/testsink"
	"github.com/async-helm/async-helm/internal/teststack"
	"github.com/async-helm/async-helm/pkg/api"
	chartrepos "github.com/async-helm/async-helm/pkg/chart/repos"
	"github.com/async-helm/async-helm/pkg/submitclient"
)

// servedRepo is an HTTPS chart repository of the test: tiny packaged, an index with
// relative chart URLs (the merged index must make them absolute), optional basic auth.
func servedRepo(t *testing.T, user, pass string) (*httptest.Server, []byte) {
	t.Helper()
	dir := t.TempDir()
	if err := testchartrepo.Package(dir, "", filepath.Join(root, "testdata", "charts", "tiny")); err != nil {
		t.Fatal(err)
	}
	files := http.FileServer(http.Dir(dir))
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); user != "" && (!ok || u != user || p != pass) {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

// unrelatedCA is a CA that signed none of the test's servers (httptest's servers all share
// one certificate, so another server's would do).
func unrelatedCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "unrelated CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func randSuffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// create makes a repository object (and deletes it when the test ends).
func createRepo(t *testing.T, dc dynamic.Interface, ns, name, display, u string, disabled bool, refs map[string]string) {
	t.Helper()
	conn := map[string]any{"url": u}
	for field, ref := range refs {
		conn[field] = map[string]any{"name": ref}
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "helm.openshift.io/v1beta1",
		"metadata":   map[string]any{"name": name},
		"spec":       map[string]any{"name": display, "disabled": disabled, "connectionConfig": conn},
	}}
	ri := dc.Resource(chartrepos.ClusterGVR).Namespace("")
	obj.SetKind("HelmChartRepository")
	if ns != "" {
		obj.SetKind("ProjectHelmChartRepository")
		ri = dc.Resource(chartrepos.ProjectGVR).Namespace(ns)
	}
	if _, err := ri.Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create %s %s: %v", obj.GetKind(), name, err)
	}
	t.Cleanup(func() { _ = ri.Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

func configMap(t *testing.T, ns, name string, data map[string]string) {
	t.Helper()
	cms := cluster.Client.CoreV1().ConfigMaps(ns)
	if _, err := cms.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cms.Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// The console's chart repositories through the built binaries: a HelmChartRepository
// trusted through a CA ConfigMap in openshift-config, a ProjectHelmChartRepository behind
// basic auth (its Secret and CA in its namespace), a disabled one and one with the wrong CA.
// index.yaml lists the two good ones keyed "<chart>--<repo>" with absolute URLs, names the
// bad one in the console's warning, and leaves the disabled one out; an install by index
// entry from each reaches deployed; chart and template answer the console's shapes.
func TestChartRepositoryObjects(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dc, err := dynamic.NewForConfig(cluster.Admin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: chartrepos.ConfigNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	ns := cluster.Namespace(t)
	sfx := randSuffix()
	clusterSrv, clusterCA := servedRepo(t, "", "")
	projectSrv, projectCA := servedRepo(t, "reader", "s3cret")
	otherCA := unrelatedCA(t)

	good, disabled, badCA, project := "ca-"+sfx, "off-"+sfx, "badca-"+sfx, "team-"+sfx
	configMap(t, chartrepos.ConfigNamespace, "ca-"+sfx, map[string]string{chartrepos.KeyCABundle: string(clusterCA)})
	configMap(t, chartrepos.ConfigNamespace, "other-"+sfx, map[string]string{chartrepos.KeyCABundle: string(otherCA)})
	configMap(t, ns, "team-ca", map[string]string{chartrepos.KeyCABundle: string(projectCA)})
	if _, err := cluster.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "team-auth"},
		Data: map[string][]byte{"username": []byte("reader"), "password": []byte("s3cret")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createRepo(t, dc, "", good, "Cluster charts", clusterSrv.URL, false, map[string]string{"ca": "ca-" + sfx})
	createRepo(t, dc, "", disabled, "Switched off", clusterSrv.URL, true, map[string]string{"ca": "ca-" + sfx})
	createRepo(t, dc, "", badCA, "Wrong CA", clusterSrv.URL, false, map[string]string{"ca": "other-" + sfx})
	createRepo(t, dc, ns, project, "Team charts", projectSrv.URL, false, map[string]string{"ca": "team-ca", "basicAuthConfig": "team-auth"})

	s := repoStack(t, ns)

	// index.yaml
	start := time.Now()
	body, ctype := s.fetch(t, http.MethodGet, api.PathChartIndex+"?namespace="+ns, nil, http.StatusOK)
	t.Logf("first index.yaml in %s", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	for i := 0; i < 20; i++ {
		s.fetch(t, http.MethodGet, api.PathChartIndex+"?namespace="+ns, nil, http.StatusOK)
	}
	t.Logf("20 more index.yaml (from the cache) in %s", time.Since(start).Round(time.Millisecond))
	if ctype != "application/yaml" {
		t.Errorf("index Content-Type %q", ctype)
	}
	var idx repo.IndexFile
	if err := yaml.Unmarshal(body, &idx); err != nil {
		t.Fatal(err)
	}
	for key, srv := range map[string]string{"tiny--" + good: clusterSrv.URL, "tiny--" + project: projectSrv.URL} {
		cvs := idx.Entries[key]
		if len(cvs) != 1 || len(cvs[0].URLs) != 1 || cvs[0].URLs[0] != srv+"/tiny-0.1.0.tgz" {
			t.Errorf("index entry %s = %+v, want tiny 0.1.0 at %s/tiny-0.1.0.tgz", key, cvs, srv)
		}
	}
	if _, ok := idx.Entries["tiny--"+disabled]; ok {
		t.Errorf("the disabled repository is listed")
	}
	var invalid []chartrepos.InvalidRepo
	if err := json.Unmarshal([]byte(idx.Annotations[chartrepos.WarningAnnotation]), &invalid); err != nil {
		t.Fatalf("console-warning annotation: %v (%v)", err, idx.Annotations)
	}
	foundBad := false
	for _, r := range invalid {
		if r.Name == badCA {
			foundBad = strings.Contains(r.Error, "certificate")
		}
	}
	if !foundBad {
		t.Errorf("the repository with the wrong CA is not named with a certificate error: %+v", invalid)
	}
	// dev (no rights in ns) may not read the index of ns's project repositories.
	if dev := cluster.Dev.BearerToken; dev != "" {
		req, _ := http.NewRequest(http.MethodGet, s.submit.URL+api.PathChartIndex+"?namespace="+ns, nil)
		req.Header.Set("Authorization", "Bearer "+dev)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("dev reading %s's index: %d, want 403", ns, resp.StatusCode)
		}
	}
	// Another namespace does not see the project repository.
	other := cluster.Namespace(t)
	body, _ = s.fetch(t, http.MethodGet, api.PathChartIndex+"?namespace="+other, nil, http.StatusOK)
	if bytes.Contains(body, []byte("tiny--"+project)) {
		t.Errorf("namespace %s sees %s's project repository", other, ns)
	}
	golden(t, "chartrepos-index", normalize(string(s.indexOnly(t, ns, good, project)), clusterSrv.URL, projectSrv.URL, sfx))

	// Installs by index entry from each reach deployed.
	for _, entry := range []string{"tiny--" + good, "tiny--" + project} {
		name := strings.SplitN(strings.TrimPrefix(entry, "tiny--"), "-", 2)[0]
		if _, err := s.client.Install(ctx, api.ReleaseRequest{Name: name, Namespace: ns, IndexEntry: entry}); err != nil {
			t.Fatalf("install %s: %v", entry, err)
		}
		waitRepoStatus(t, s, ns, name, "deployed", 2*time.Minute)
	}
	// The wrong CA: a clear error at once, nothing reserved.
	start = time.Now()
	_, err = s.client.Install(ctx, api.ReleaseRequest{Name: "bad", Namespace: ns, IndexEntry: "tiny--" + badCA})
	var apiErr *submitclient.APIError
	if !asAPIError(err, &apiErr) || apiErr.Status != http.StatusUnprocessableEntity || !strings.Contains(apiErr.Message, "certificate") {
		t.Errorf("install from the repository with the wrong CA: %v", err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("the wrong CA took %s to fail", d)
	} else {
		t.Logf("the wrong CA failed in %s: %v", d.Round(time.Millisecond), err)
	}
	if _, err := s.client.Install(ctx, api.ReleaseRequest{Name: "off", Namespace: ns, IndexEntry: "tiny--" + disabled}); !asAPIError(err, &apiErr) || apiErr.Status != http.StatusUnprocessableEntity {
		t.Errorf("install from the disabled repository: %v", err)
	}

	// chart: the console's shape (Helm's chart as JSON).
	body, ctype = s.fetch(t, http.MethodGet, api.PathChart+"?"+url.Values{"indexEntry": {"tiny--" + project}, "namespace": {ns}}.Encode(), nil, http.StatusOK)
	if ctype != "application/json" {
		t.Errorf("chart Content-Type %q", ctype)
	}
	golden(t, "chartrepos-chart", string(body))
	// The same chart by its URL, with the repository named by its entry (as the console sends it).
	s.fetch(t, http.MethodGet, api.PathChart+"?"+url.Values{"url": {projectSrv.URL + "/tiny-0.1.0.tgz"}, "indexEntry": {"tiny--" + project}, "namespace": {ns}}.Encode(), nil, http.StatusOK)
	// Without the namespace, the project repository is not there.
	s.fetch(t, http.MethodGet, api.PathChart+"?"+url.Values{"indexEntry": {"tiny--" + project}}.Encode(), nil, http.StatusUnprocessableEntity)

	// template: the manifests an install would create, as text/yaml.
	req, _ := json.Marshal(api.ReleaseRequest{Name: "preview", Namespace: ns, IndexEntry: "tiny--" + good, Values: map[string]any{"message": "previewed"}})
	body, ctype = s.fetch(t, http.MethodPost, api.PathTemplate, req, http.StatusOK)
	if ctype != "text/yaml" {
		t.Errorf("template Content-Type %q", ctype)
	}
	golden(t, "chartrepos-template", string(body))
	if rels, err := s.client.List(ctx, ns); err != nil || len(rels) != 2 {
		t.Errorf("template reserved something: %d releases, %v", len(rels), err)
	}
}

// repoStack is newStack whose submit admits installs whatever other tests left queued in
// the shared cluster (MAX_QUEUED counts the whole cluster).
func repoStack(t *testing.T, ns string) *stack {
	t.Helper()
	s := &stack{charts: testcharts.Start(t), sink: testsink.Start(t)}
	env := func(extra map[string]string) map[string]string {
		out := map[string]string{"KUBECONFIG": cluster.Kubeconfig, "LOG_LEVEL": "info", "ALLOW_LOOPBACK_CHARTS": "true",
			"EVENT_SIGNING_KEY": "e2e-signing-key-0123456789abcdef0123", "MAX_QUEUED": "10000000"}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	var w *eventing.Wiring
	s.ports, w = wire(t, s.sink.URL)
	s.executor = teststack.RunPort(t, bins["executor"], s.ports.Executor, env(nil))
	s.submit = teststack.RunPort(t, bins["submit"], s.ports.Submit, env(map[string]string{"K_SINK": w.BrokerURL}))
	s.notifier = teststack.RunPort(t, bins["notifier"], s.ports.Notifier, env(map[string]string{"K_SINK": w.BrokerURL, "NAMESPACES": ns}))
	s.client = &submitclient.Client{Server: s.submit.URL, Token: cluster.Operator.BearerToken}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("submit log:\n%s\nexecutor log:\n%s", tail(s.submit.Output()), tail(s.executor.Output()))
		}
	})
	return s
}

// indexOnly is the index of the test's own repositories (other tests may add cluster ones).
func (s *stack) indexOnly(t *testing.T, ns string, keep ...string) []byte {
	t.Helper()
	body, _ := s.fetch(t, http.MethodGet, api.PathChartIndex+"?namespace="+ns, nil, http.StatusOK)
	var idx repo.IndexFile
	if err := yaml.Unmarshal(body, &idx); err != nil {
		t.Fatal(err)
	}
	out := map[string]any{"apiVersion": idx.APIVersion}
	entries := map[string]any{}
	for _, k := range keep {
		entries["tiny--"+k] = idx.Entries["tiny--"+k]
	}
	out["entries"] = entries
	b, err := yaml.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var (
	digestRe  = regexp.MustCompile(`digest: [0-9a-f]{64}`)
	createdRe = regexp.MustCompile(`created: "[^"]*"`)
)

func normalize(s, clusterURL, projectURL, sfx string) string {
	s = strings.ReplaceAll(s, clusterURL, "https://CLUSTER-REPO")
	s = strings.ReplaceAll(s, projectURL, "https://PROJECT-REPO")
	s = strings.ReplaceAll(s, sfx, "SFX")
	s = digestRe.ReplaceAllString(s, "digest: DIGEST")
	return createdRe.ReplaceAllString(s, `created: "CREATED"`)
}

// fetch calls submit as the operator and checks the status.
func (s *stack) fetch(t *testing.T, method, path string, body []byte, want int) ([]byte, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.submit.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+cluster.Operator.BearerToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d, want %d: %s", method, path, resp.StatusCode, want, out)
	}
	return out, resp.Header.Get("Content-Type")
}

func waitRepoStatus(t *testing.T, s *stack, ns, name, want string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		rel, err := s.client.Get(context.Background(), ns, name)
		if err == nil && rel.Info != nil {
			switch st := rel.Info.Status.String(); {
			case st == want:
				return
			case st == "failed":
				t.Fatalf("%s/%s failed: %s", ns, name, rel.Info.Description)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/%s not %s after %s (%v)", ns, name, want, timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func asAPIError(err error, target **submitclient.APIError) bool {
	e, ok := err.(*submitclient.APIError)
	if ok {
		*target = e
	}
	return ok
}
