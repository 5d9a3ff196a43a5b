package repos

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/repo"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"

	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
)

// repoServer serves an index (relative chart URLs: "charts/<name>-<version>.tgz") of the
// given charts over HTTPS, optionally behind basic auth, counting index fetches.
type repoServer struct {
	*httptest.Server
	ca      []byte
	indexes atomic.Int64
}

func newRepoServer(t *testing.T, user, pass string, charts ...*repo.ChartVersion) *repoServer {
	t.Helper()
	idx := repo.NewIndexFile()
	for _, cv := range charts {
		idx.Entries[cv.Name] = append(idx.Entries[cv.Name], cv)
	}
	raw, err := yaml.Marshal(idx)
	if err != nil {
		t.Fatal(err)
	}
	rs := &repoServer{}
	rs.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); user != "" && (!ok || u != user || p != pass) {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		if r.URL.Path == "/index.yaml" {
			rs.indexes.Add(1)
			_, _ = w.Write(raw)
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(rs.Close)
	rs.ca = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rs.Certificate().Raw})
	return rs
}

func cv(name, version, typ string) *repo.ChartVersion {
	return &repo.ChartVersion{Metadata: &chart.Metadata{Name: name, Version: version, APIVersion: "v2", Type: typ},
		URLs: []string{"charts/" + name + "-" + version + ".tgz"}}
}

func repoObject(kind, ns, name, u string, disabled bool, refs map[string]string) *unstructured.Unstructured {
	conn := map[string]any{"url": u}
	for f, n := range refs {
		conn[f] = map[string]any{"name": n}
	}
	o := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "helm.openshift.io/v1beta1", "kind": kind,
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"disabled": disabled, "connectionConfig": conn},
	}}
	if ns != "" {
		o.SetNamespace(ns)
	}
	return o
}

func startSet(t *testing.T, env map[string]string, envCreds map[string]chartsource.Credentials, objs []runtime.Object, kube ...runtime.Object) *Set {
	t.Helper()
	return startSetAnd(t, env, envCreds, objs, kube, nil)
}

// startSetAnd is startSet that also applies change before the Set starts (its refresh
// reads the source's fields from then on).
func startSetAnd(t *testing.T, env map[string]string, envCreds map[string]chartsource.Credentials, objs, kube []runtime.Object, change func(*Set)) *Set {
	t.Helper()
	return startSetWith(t, objs, func(s *Set) {
		s.Client, s.Env, s.EnvCreds = fake.NewSimpleClientset(kube...), env, envCreds
		s.Source.HTTP = chartsource.Policy{AllowLoopback: true}.HTTPClient(5 * time.Second)
		if change != nil {
			change(s)
		}
	})
}

func index(t *testing.T, s *Set, ns string) *repo.IndexFile {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	idx, err := s.Index(ctx, ns, true)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

func cm(ns, name, key, value string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{key: value}}
}

// The merged index: enabled cluster repositories (CA from openshift-config), the
// namespace's project repositories (basic auth and CA from their namespace) and
// CHART_REPOSITORIES, keyed "<chart>--<repo>" with absolute URLs; disabled repositories and
// library charts left out; a repository whose CA is missing named in the console's warning.
func TestIndexMergesRepositories(t *testing.T) {
	clusterSrv := newRepoServer(t, "", "", cv("tiny", "0.1.0", ""), cv("tiny", "0.2.0", ""), cv("lib", "1.0.0", "library"))
	projectSrv := newRepoServer(t, "reader", "s3cret", cv("web", "1.0.0", ""))
	envSrv := newRepoServer(t, "", "", cv("tiny", "0.1.0", ""))
	objs := []runtime.Object{
		repoObject("HelmChartRepository", "", "acme", clusterSrv.URL, false, map[string]string{"ca": "acme-ca"}),
		repoObject("HelmChartRepository", "", "off", clusterSrv.URL, true, map[string]string{"ca": "acme-ca"}),
		repoObject("HelmChartRepository", "", "noca", clusterSrv.URL, false, map[string]string{"ca": "missing"}),
		repoObject("ProjectHelmChartRepository", "team", "private", projectSrv.URL, false, map[string]string{"ca": "ca", "basicAuthConfig": "auth"}),
	}
	// The env repository is HTTPS with its own CA, given as CHART_REPOSITORY_SECRETS would.
	s := startSet(t, map[string]string{"local": envSrv.URL}, map[string]chartsource.Credentials{"local": {CA: envSrv.ca}}, objs,
		cm(ConfigNamespace, "acme-ca", KeyCABundle, string(clusterSrv.ca)),
		cm("team", "ca", KeyCABundle, string(projectSrv.ca)),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "auth"}, Data: map[string][]byte{"username": []byte("reader"), "password": []byte("s3cret")}})

	idx := index(t, s, "team")
	want := map[string]string{
		"tiny--acme":   clusterSrv.URL + "/charts/tiny-0.2.0.tgz",
		"web--private": projectSrv.URL + "/charts/web-1.0.0.tgz",
		"tiny--local":  envSrv.URL + "/charts/tiny-0.1.0.tgz",
	}
	for key, u := range want {
		if cvs := idx.Entries[key]; len(cvs) == 0 || cvs[0].URLs[0] != u {
			t.Errorf("%s = %+v, want newest first at %s", key, cvs, u)
		}
	}
	if cvs := idx.Entries["tiny--acme"]; len(cvs) != 2 || cvs[0].Version != "0.2.0" {
		t.Errorf("tiny--acme versions %+v, want 0.2.0 then 0.1.0", cvs)
	}
	for _, absent := range []string{"lib--acme", "tiny--off"} {
		if _, ok := idx.Entries[absent]; ok {
			t.Errorf("%s is listed", absent)
		}
	}
	var invalid []InvalidRepo
	if err := json.Unmarshal([]byte(idx.Annotations[WarningAnnotation]), &invalid); err != nil {
		t.Fatal(err)
	}
	if len(invalid) != 1 || invalid[0].Name != "noca" || !strings.Contains(invalid[0].Error, "missing") {
		t.Errorf("invalid repositories %+v, want noca's missing ConfigMap", invalid)
	}

	// Without the namespace the project repository is not seen.
	if _, ok := index(t, s, "").Entries["web--private"]; ok {
		t.Error("the project repository is listed without its namespace")
	}
	if _, ok := index(t, s, "other").Entries["web--private"]; ok {
		t.Error("the project repository is listed in another namespace")
	}
}

// The index is answered from the cache: many requests, one fetch per refresh.
func TestIndexIsCached(t *testing.T) {
	srv := newRepoServer(t, "", "", cv("tiny", "0.1.0", ""))
	s := startSet(t, nil, nil, []runtime.Object{repoObject("HelmChartRepository", "", "acme", srv.URL, false, map[string]string{"ca": "ca"})},
		cm(ConfigNamespace, "ca", KeyCABundle, string(srv.ca)))
	for i := 0; i < 20; i++ {
		if _, ok := index(t, s, "ns").Entries["tiny--acme"]; !ok {
			t.Fatal("tiny--acme missing")
		}
	}
	if n := srv.indexes.Load(); n != 1 {
		t.Errorf("20 index requests fetched the repository's index %d times, want 1", n)
	}
	s.refresh(context.Background()) // what a Kick or the ticker runs
	if n := srv.indexes.Load(); n != 2 {
		t.Errorf("after a refresh the index was fetched %d times, want 2", n)
	}
}

// Index entries resolve as the console resolves them: a project repository hides a cluster
// one of the same name, which hides CHART_REPOSITORIES'; a disabled one resolves to nothing;
// basic auth needs https.
func TestResolution(t *testing.T) {
	objs := []runtime.Object{
		repoObject("HelmChartRepository", "", "shared", "https://cluster.example", false, nil),
		repoObject("ProjectHelmChartRepository", "team", "shared", "https://project.example", false, nil),
		repoObject("HelmChartRepository", "", "off", "https://off.example", true, nil),
		repoObject("ProjectHelmChartRepository", "team", "plain", "http://plain.example", false, map[string]string{"basicAuthConfig": "auth"}),
	}
	s := startSet(t, map[string]string{"shared": "https://env.example", "env": "https://env.example"}, nil, objs)
	src := s.Source
	for _, tc := range []struct{ ns, name, url string }{
		{"team", "shared", "https://project.example"},
		{"other", "shared", "https://cluster.example"},
		{"", "env", "https://env.example"},
	} {
		r, err := src.Lookup(context.Background(), tc.ns, tc.name)
		if err != nil || r.URL != tc.url {
			t.Errorf("Lookup(%q, %q) = %s, %v; want %s", tc.ns, tc.name, r.URL, err, tc.url)
		}
	}
	if _, err := src.Lookup(context.Background(), "team", "off"); err == nil {
		t.Error("the disabled repository resolved")
	}
	if _, err := src.Lookup(context.Background(), "team", "plain"); err == nil || !strings.Contains(err.Error(), "https") {
		t.Errorf("basic auth over http: %v", err)
	}
}
