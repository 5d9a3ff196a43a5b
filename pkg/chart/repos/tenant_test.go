package repos

import (
	"context"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"helm.sh/helm/v3/pkg/repo"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

// withUser puts user:pass into an https URL.
func withUser(u, user, pass string) string {
	return strings.Replace(u, "https://", "https://"+user+":"+pass+"@", 1)
}

// A cluster repository's URL may carry its password (https://user:pass@host): neither the
// console-warning of an index that cannot be read nor the chart URLs of one that can may
// show it (the namespace-less index needs no access review).
func TestIndexRedactsRepositoryCredentials(t *testing.T) {
	srv := newRepoServer(t, "reader", "s3cret", cv("tiny", "0.1.0", ""))
	objs := []runtime.Object{
		repoObject("HelmChartRepository", "", "good", withUser(srv.URL, "reader", "s3cret"), false, map[string]string{"ca": "ca"}),
		repoObject("HelmChartRepository", "", "missing", withUser(srv.URL, "reader", "s3cret")+"/missing", false, map[string]string{"ca": "ca"}),
	}
	s := startSet(t, nil, nil, objs, cm(ConfigNamespace, "ca", KeyCABundle, string(srv.ca)))
	idx := index(t, s, "")
	warning := idx.Annotations[WarningAnnotation]
	if !strings.Contains(warning, "missing") || !strings.Contains(warning, "404") {
		t.Fatalf("warning %q, want the missing repository's 404", warning)
	}
	if strings.Contains(warning, "s3cret") {
		t.Errorf("the console-warning shows the repository's password: %s", warning)
	}
	cvs := idx.Entries["tiny--good"]
	if len(cvs) == 0 {
		t.Fatalf("tiny--good missing: %v", idx.Entries)
	}
	if u := cvs[0].URLs[0]; strings.Contains(u, "s3cret") {
		t.Errorf("the served chart URL shows the repository's password: %s", u)
	}
}

// authServer is an https server that records the basic auth it is sent.
type authServer struct {
	*httptest.Server
	requests atomic.Int64
	sent     atomic.Value // "user:pass" last received
}

func newAuthServer(t *testing.T) *authServer {
	a := &authServer{}
	a.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.requests.Add(1)
		if u, p, ok := r.BasicAuth(); ok {
			a.sent.Store(u + ":" + p)
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(a.Close)
	return a
}

// secretReads counts the GETs and LISTs of Secrets of namespace the fake clientset served.
func secretReads(cs *fake.Clientset, namespace string) int {
	n := 0
	for _, a := range cs.Actions() {
		if a.GetResource().Resource == "secrets" && a.GetNamespace() == namespace {
			n++
		}
	}
	return n
}

// A tenant who may create a ProjectHelmChartRepository but not read Secret X points it at
// their own https server naming X: the background refresh neither reads X nor contacts
// the server. (Before, every refresh sent X's username and password there.)
func TestBackgroundRefreshNeverReadsProjectSecrets(t *testing.T) {
	exfil := newAuthServer(t)
	objs := []runtime.Object{repoObject("ProjectHelmChartRepository", "team", "exfil", exfil.URL, false,
		map[string]string{"basicAuthConfig": "x", "ca": "ca"})}
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: exfil.Certificate().Raw})
	s := startSet(t, nil, nil, objs, cm("team", "ca", KeyCABundle, string(ca)),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "x"},
			Data: map[string][]byte{"username": []byte("admin"), "password": []byte("hunter2")}})
	_ = index(t, s, "")             // after the first refresh
	s.refresh(context.Background()) // what a Kick or the ticker runs
	if n := secretReads(s.Client.(*fake.Clientset), "team"); n != 0 {
		t.Errorf("the background refresh read Secrets %d times", n)
	}
	if n := exfil.requests.Load(); n != 0 {
		t.Errorf("the background refresh contacted the tenant's server %d times (sent %v)", n, exfil.sent.Load())
	}
}

// CredentialSecrets names what a fetch would send, reading only the repository objects:
// the Secrets of the project repository an index entry names or a chart URL is under.
func TestCredentialSecrets(t *testing.T) {
	objs := []runtime.Object{
		repoObject("ProjectHelmChartRepository", "team", "private", "https://private.example/charts", false,
			map[string]string{"basicAuthConfig": "auth", "tlsClientConfig": "tls"}),
		repoObject("ProjectHelmChartRepository", "team", "open", "https://open.example", false, map[string]string{"ca": "ca"}),
		repoObject("ProjectHelmChartRepository", "team", "off", "https://off.example", true, map[string]string{"basicAuthConfig": "off"}),
		repoObject("HelmChartRepository", "", "private", "https://cluster.example", false, map[string]string{"tlsClientConfig": "cluster"}),
	}
	s := startSet(t, nil, nil, objs)
	for _, tc := range []struct {
		ns, entry, url string
		want           string
	}{
		{"team", "web--private", "", "[auth tls]"},
		{"team", "", "https://private.example/charts/web-1.0.0.tgz", "[auth tls]"},
		{"team", "", "https://private.example/chartsother/web.tgz", "[]"},
		{"team", "web--open", "", "[]"},
		{"team", "", "https://off.example/web.tgz", "[]"},
		{"other", "web--private", "", "[]"}, // the cluster's: credentials of openshift-config
		{"team", "", "https://elsewhere.example/web.tgz", "[]"},
		// A repository the namespace does not see (yet, or disabled): refused, since it
		// could appear before the fetch and be used unchecked.
		{"team", "web--off", "", "error"},
		{"team", "web--later", "", "error"},
	} {
		names, err := s.CredentialSecrets(tc.ns, tc.entry, tc.url)
		got := fmt.Sprint(names)
		if err != nil {
			got = "error"
		}
		if got != tc.want {
			t.Errorf("CredentialSecrets(%q, %q, %q) = %s (%v), want %s", tc.ns, tc.entry, tc.url, got, err, tc.want)
		}
	}
	if n := secretReads(s.Client.(*fake.Clientset), "team"); n != 0 {
		t.Errorf("CredentialSecrets read Secrets %d times", n)
	}
}

// The index cache keeps at most its budget, least recently used out; an index over the
// per-index bound is kept as an error, not as its bytes.
func TestIndexCacheBudget(t *testing.T) {
	c := newIndexCache(100, 50)
	ok := func(cost int64) *fetched { return &fetched{index: repo.NewIndexFile(), cost: cost} }
	c.put("a", ok(40), true)
	c.put("b", ok(40), true)
	if _, hit := c.get("a"); !hit { // a is now the most recently used
		t.Fatal("a missing")
	}
	c.put("c", ok(40), true)
	if _, hit := c.get("b"); hit {
		t.Error("b, the least recently used, was kept over the budget")
	}
	for _, k := range []string{"a", "c"} {
		if _, hit := c.get(k); !hit {
			t.Errorf("%s evicted", k)
		}
	}
	if bytes, n := c.size(); bytes != 80 || n != 2 {
		t.Errorf("cache holds %d bytes in %d entries, want 80 in 2", bytes, n)
	}
	c.put("huge", ok(60), true)
	f, _ := c.get("huge")
	if f.err == nil || !strings.Contains(f.err.Error(), "CHART_INDEX_MAX_BYTES") || f.index != nil {
		t.Errorf("an index over the per-index bound was kept: %+v", f)
	}
	// A background refresh is not a use: it leaves the order as the requests made it.
	c.put("a", ok(40), false)
	c.put("d", ok(40), true)
	if _, hit := c.get("a"); hit {
		t.Error("a refresh kept a, which no request used, over c")
	}
	c.setBudget(40, 0)
	if bytes, _ := c.size(); bytes > 40 {
		t.Errorf("after a smaller budget the cache holds %d bytes", bytes)
	}
}

// Project repositories of many namespaces fill the cache only up to its budget.
func TestProjectIndexesWithinBudget(t *testing.T) {
	srv := newRepoServer(t, "", "", cv("tiny", "0.1.0", ""), cv("web", "1.0.0", ""))
	var objs []runtime.Object
	var kube []runtime.Object
	for i := 0; i < 10; i++ {
		ns := fmt.Sprintf("team-%d", i)
		objs = append(objs, repoObject("ProjectHelmChartRepository", ns, "r", srv.URL, false, map[string]string{"ca": "ca"}))
		kube = append(kube, cm(ns, "ca", KeyCABundle, string(srv.ca)))
	}
	s := startSet(t, nil, nil, objs, kube...)
	_ = index(t, s, "team-0")
	f, ok := s.indexes.get(projectKey(t, s, "team-0"))
	if !ok || f.cost == 0 {
		t.Fatalf("team-0's index not cached with its cost: %+v", f)
	}
	s.SetIndexBudget(3*f.cost, 0)
	for i := 1; i < 10; i++ {
		if _, ok := index(t, s, fmt.Sprintf("team-%d", i)).Entries["tiny--r"]; !ok {
			t.Fatalf("team-%d: tiny--r missing", i)
		}
	}
	if bytes, n := s.IndexCacheSize(); n != 3 || bytes > 3*f.cost {
		t.Errorf("cache holds %d indexes (%d bytes), want 3 within %d", n, bytes, 3*f.cost)
	}
}

func projectKey(t *testing.T, s *Set, ns string) string {
	t.Helper()
	for _, r := range s.Repos(context.Background(), ns) {
		if r.Scope == ScopeProject {
			return r.cacheKey()
		}
	}
	t.Fatalf("no project repository in %s", ns)
	return ""
}
