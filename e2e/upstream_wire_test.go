package e2e

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/repo"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// wireFile holds the shape of every request the unmodified oc-helm (9265829) sends in
// TestUpstreamOcHelmCommands: TestUpstreamOcHelmWire must send exactly these, and the live
// test checks that the plugin still sends nothing else (OC_HELM_UPSTREAM_RECORD=1 rewrites it).
var wireFile = filepath.Join("testdata", "upstream-ochelm-wire.txt")

// The unmodified oc-helm's session, request by request as the plugin builds them (cookies,
// CSRF double submit, Origin, its JSON bodies, its list's `limitInfo=%!s(bool=false)`) and its
// answers decoded into the Helm v3 types it decodes them into. It runs in every `make test`:
// the plugin's source is not ours to keep, so the live test (upstream_ochelm_test.go) runs only
// with a checkout, and this one replays its recorded traffic.
func TestUpstreamOcHelmWire(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	s := newStack(t, ns)
	front := startConsoleFront(t, s)
	c := newConsoleClient(front.host, cluster.Operator.BearerToken, ns)

	// index, show chart|values: the merged index, then the chart by its URL.
	tiny := c.chartURL(t, "test", "tiny")
	var ch chart.Chart
	if code, msg := c.do(t, http.MethodGet, "/api/helm/chart?url="+tiny, nil, &ch); code != http.StatusOK || ch.Metadata == nil ||
		ch.Metadata.Name != "tiny" || ch.Values["message"] != "hello" {
		t.Fatalf("show chart: %d %q %+v", code, msg, ch.Metadata)
	}

	// install-async, upgrade-async (and upgrade-async --install of a new name): the Secret at once.
	c.async(t, http.MethodPost, "web", tiny, map[string]any{"message": "one"}, "sh.helm.release.v1.web.v1")
	waitStatus(t, s, ns, "web", "deployed", time.Minute)
	c.mustGet(t, "web")
	c.async(t, http.MethodPut, "web", c.chartURL(t, "test", "tiny"), map[string]any{"message": "two"}, "sh.helm.release.v1.web.v2")
	c.installMissing(t, "web2")
	c.async(t, http.MethodPost, "web2", c.chartURL(t, "test", "tiny"), map[string]any{}, "sh.helm.release.v1.web2.v1")
	waitStatus(t, s, ns, "web", "deployed", time.Minute)
	waitStatus(t, s, ns, "web2", "deployed", time.Minute)

	// install, upgrade --install, upgrade, rollback, history, list: the final releases.
	c.sync(t, http.MethodPost, "db", c.chartURL(t, "test", "tiny"), map[string]any{}, 1)
	c.installMissing(t, "db2")
	c.sync(t, http.MethodPost, "db2", c.chartURL(t, "test", "tiny"), map[string]any{}, 1)
	c.mustGet(t, "db")
	c.sync(t, http.MethodPut, "db", c.chartURL(t, "test", "tiny"), map[string]any{"replicas": 2}, 2)
	prev := c.mustGet(t, "db").Version - 1
	var rb release.Release
	if code, msg := c.do(t, http.MethodPatch, "/api/helm/release", upstreamRequest{Name: "db", Namespace: ns, Version: prev}, &rb); code != http.StatusOK ||
		rb.Version != 3 || rb.Info == nil || rb.Info.Status != release.StatusDeployed {
		t.Fatalf("rollback db to %d: %d %q %+v", prev, code, msg, rb)
	}
	var hist []release.Release
	if code, msg := c.do(t, http.MethodGet, fmt.Sprintf("/api/helm/release/history?name=%s&ns=%s", "db", ns), nil, &hist); code != http.StatusOK ||
		len(hist) != 3 || hist[0].Info.Status != release.StatusSuperseded || hist[2].Info.Description != "Rollback to 1" {
		t.Fatalf("history db: %d %q %+v", code, msg, hist)
	}
	if names := c.list(t); !slices.Equal(names, []string{"db", "db2", "web", "web2"}) {
		t.Errorf("list: %v", names)
	}

	// uninstall-async: 204, no body; uninstall: Helm's response; then gone from the list.
	if code, msg := c.do(t, http.MethodDelete, fmt.Sprintf("/api/helm/release/async?name=%s&ns=%s&version=%s", "web", ns, "2"), nil, nil); code != http.StatusNoContent {
		t.Fatalf("uninstall-async web: %d %q", code, msg)
	}
	for _, name := range []string{"db", "db2", "web2"} {
		var un release.UninstallReleaseResponse
		if code, msg := c.do(t, http.MethodDelete, fmt.Sprintf("/api/helm/release?name=%s&ns=%s", name, ns), nil, &un); code != http.StatusOK {
			t.Fatalf("uninstall %s: %d %q", name, code, msg)
		}
	}
	waitGone(t, s, ns, "web", time.Minute)
	if names := c.list(t); len(names) != 0 {
		t.Errorf("list after uninstall: %v", names)
	}

	// Errors as the plugin prints them: the answer's "error".
	for _, req := range []struct{ method, path string }{
		{http.MethodGet, fmt.Sprintf("/api/helm/release/history?name=%s&ns=%s", "nothere", ns)},
		{http.MethodDelete, fmt.Sprintf("/api/helm/release?name=%s&ns=%s", "nothere", ns)},
	} {
		if code, msg := c.do(t, req.method, req.path, nil, &[]release.Release{}); code < 400 || !strings.Contains(msg, "release: not found") {
			t.Errorf("%s %s: %d %q", req.method, req.path, code, msg)
		}
	}
	if code, msg := c.do(t, http.MethodPost, "/api/helm/release/async", upstreamRequest{Name: "Bad_Name", Namespace: ns, ChartURL: tiny, Values: map[string]any{}},
		&corev1.Secret{}); code < 400 || !strings.Contains(msg, "name") {
		t.Errorf("install-async of an invalid name: %d %q", code, msg)
	}
	bad := c.chartURL(t, "test", "badtemplate")
	if code, msg := c.do(t, http.MethodPost, "/api/helm/release", upstreamRequest{Name: "broken", Namespace: ns, ChartURL: bad, Values: map[string]any{}},
		&release.Release{}); code < 400 || !strings.Contains(msg, "value is required") {
		t.Errorf("install of a chart that cannot render: %d %q", code, msg)
	}
	if code, msg := c.do(t, http.MethodPost, "/api/helm/verify", map[string]any{"chart_url": tiny, "values": map[string]any{"provider": "developer-console"}},
		&map[string]any{}); code != http.StatusNotImplemented || !strings.Contains(msg, "chart-verifier") {
		t.Errorf("verify: %d %q", code, msg)
	}
	front.matchesFile(t, true)
}

// upstreamRequest is the plugin's request body: every field always sent.
type upstreamRequest struct {
	Name      string         `json:"name"`
	Namespace string         `json:"namespace"`
	ChartURL  string         `json:"chart_url"`
	Values    map[string]any `json:"values"`
	Version   int            `json:"version"`
}

// consoleClient sends requests as the unmodified oc-helm builds them.
type consoleClient struct {
	host, token, ns, csrf string
	http                  *http.Client
}

func newConsoleClient(host, token, ns string) *consoleClient {
	b := make([]byte, 64)
	_, _ = rand.Read(b)
	return &consoleClient{host: host, token: token, ns: ns, csrf: base64.StdEncoding.EncodeToString(b),
		http: &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}}
}

// do sends one request and decodes a 2xx answer into v (JSON; YAML for *repo.IndexFile), or
// answers the error the plugin prints: the body's "error" above 399.
func (c *consoleClient) do(t *testing.T, method, path string, body, v any) (int, string) {
	t.Helper()
	var buf io.Reader
	if body != nil {
		b := new(bytes.Buffer)
		if err := json.NewEncoder(b).Encode(body); err != nil {
			t.Fatal(err)
		}
		buf = b
	}
	req, err := http.NewRequest(method, "https://"+c.host+path, buf)
	if err != nil {
		t.Fatal(err)
	}
	req.AddCookie(&http.Cookie{Name: "csrf-token", Value: c.csrf})
	req.AddCookie(&http.Cookie{Name: "openshift-session-token", Value: c.token})
	req.Header.Add("Content-Type", "application/json")
	req.Header.Add("X-CSRFToken", c.csrf)
	req.Header.Add("Origin", "https://"+c.host)
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode > 399 {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(raw, &e)
		return resp.StatusCode, e.Error
	}
	if v == nil || resp.StatusCode == http.StatusNoContent {
		return resp.StatusCode, ""
	}
	if idx, ok := v.(*repo.IndexFile); ok {
		err = yaml.Unmarshal(raw, idx)
	} else {
		err = json.Unmarshal(raw, v)
	}
	if err != nil {
		t.Fatalf("%s %s: %d, the plugin cannot decode the answer into %T: %v\n%s", method, path, resp.StatusCode, v, err, raw)
	}
	return resp.StatusCode, ""
}

// chartURL reads the index, as the plugin does before each install and show, and answers the
// latest URL of <chart>--<repository>.
func (c *consoleClient) chartURL(t *testing.T, repository, name string) string {
	t.Helper()
	var idx repo.IndexFile
	if code, msg := c.do(t, http.MethodGet, "/api/helm/charts/index.yaml?namespace="+c.ns, nil, &idx); code != http.StatusOK {
		t.Fatalf("index: %d %q", code, msg)
	}
	idx.SortEntries()
	versions := idx.Entries[name+"--"+repository]
	if len(versions) == 0 || len(versions[0].URLs) == 0 {
		t.Fatalf("index: no %s--%s in %v", name, repository, idx.Entries)
	}
	return versions[0].URLs[0]
}

// async is install-async (POST) or upgrade-async (PUT): 201 with the revision's Secret.
func (c *consoleClient) async(t *testing.T, method, name, chartURL string, values map[string]any, secret string) {
	t.Helper()
	var sec corev1.Secret
	code, msg := c.do(t, method, "/api/helm/release/async", upstreamRequest{Name: name, Namespace: c.ns, ChartURL: chartURL, Values: values}, &sec)
	if code != http.StatusCreated || sec.Name != secret || sec.UID == "" {
		t.Fatalf("%s async %s: %d %q, secret %q (%q)", method, name, code, msg, sec.Name, sec.UID)
	}
}

// sync is install (POST) or upgrade (PUT): 200 with the deployed release.
func (c *consoleClient) sync(t *testing.T, method, name, chartURL string, values map[string]any, revision int) {
	t.Helper()
	var rel release.Release
	code, msg := c.do(t, method, "/api/helm/release", upstreamRequest{Name: name, Namespace: c.ns, ChartURL: chartURL, Values: values}, &rel)
	if code != http.StatusOK || rel.Name != name || rel.Version != revision || rel.Info == nil || rel.Info.Status != release.StatusDeployed {
		t.Fatalf("%s %s: %d %q %+v", method, name, code, msg, rel)
	}
}

// mustGet is the read before an upgrade (and a rollback without a revision).
func (c *consoleClient) mustGet(t *testing.T, name string) release.Release {
	t.Helper()
	var rel release.Release
	if code, msg := c.do(t, http.MethodGet, fmt.Sprintf("/api/helm/release?name=%s&ns=%s", name, c.ns), nil, &rel); code != http.StatusOK || rel.Name != name {
		t.Fatalf("get %s: %d %q", name, code, msg)
	}
	return rel
}

// installMissing is `upgrade --install`'s read of a release that does not exist: the plugin
// installs only if the error says Helm's "release: not found".
func (c *consoleClient) installMissing(t *testing.T, name string) {
	t.Helper()
	code, msg := c.do(t, http.MethodGet, fmt.Sprintf("/api/helm/release?name=%s&ns=%s", name, c.ns), nil, &release.Release{})
	if code < 400 || !strings.Contains(msg, "release: not found") {
		t.Fatalf("get %s before upgrade --install: %d %q, want Helm's \"release: not found\"", name, code, msg)
	}
}

// list is the plugin's `list`, sent with its unformatted bool.
func (c *consoleClient) list(t *testing.T) []string {
	t.Helper()
	var rels []release.Release
	if code, msg := c.do(t, http.MethodGet, fmt.Sprintf("/api/helm/releases?ns=%s&limitInfo=%s", c.ns, any(false)), nil, &rels); code != http.StatusOK {
		t.Fatalf("list: %d %q", code, msg)
	}
	names := []string{}
	for _, r := range rels {
		if r.Chart == nil || r.Chart.Metadata == nil || r.Info == nil {
			t.Fatalf("list: %s lacks what the plugin prints (chart metadata, info)", r.Name)
		}
		names = append(names, r.Name)
	}
	sort.Strings(names)
	return names
}

// consoleFront serves submit over TLS as the console's route (https, the session cookie and
// CSRF double submit) and records the shape of every request it passes on.
type consoleFront struct {
	host   string
	mu     sync.Mutex
	shapes map[string]bool
}

func startConsoleFront(t *testing.T, s *stack) *consoleFront {
	t.Helper()
	target, err := url.Parse(s.submit.URL)
	if err != nil {
		t.Fatal(err)
	}
	f := &consoleFront{shapes: map[string]bool{}}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		r.Body = io.NopCloser(bytes.NewReader(body))
		f.mu.Lock()
		f.shapes[wireShape(r, body)] = true
		f.mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	f.host = strings.TrimPrefix(srv.URL, "https://")
	return f
}

// record rewrites wireFile with the recorded shapes.
func (f *consoleFront) record(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	lines := make([]string, 0, len(f.shapes))
	for s := range f.shapes {
		lines = append(lines, s)
	}
	f.mu.Unlock()
	sort.Strings(lines)
	head := "# Every request shape of the unmodified oc-helm (github.com/redhat-developer/oc-helm 9265829) in\n" +
		"# TestUpstreamOcHelmCommands; TestUpstreamOcHelmWire replays exactly these. Written by that test\n" +
		"# with " + upstreamRecordEnv + "=1 and " + upstreamSrcEnv + " set.\n"
	if err := os.WriteFile(wireFile, []byte(head+strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// matchesFile compares the recorded shapes with wireFile: exactly (the replay), or each one
// found there (the live plugin, which may send fewer).
func (f *consoleFront) matchesFile(t *testing.T, exactly bool) {
	t.Helper()
	f.mu.Lock()
	got := make([]string, 0, len(f.shapes))
	for s := range f.shapes {
		got = append(got, s)
	}
	f.mu.Unlock()
	sort.Strings(got)
	raw, err := os.ReadFile(wireFile)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, line := range strings.Split(string(raw), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			want[line] = true
		}
	}
	for _, s := range got {
		if !want[s] {
			t.Errorf("a request not in %s:\n%s", wireFile, s)
		}
		delete(want, s)
	}
	for s := range want {
		if exactly {
			t.Errorf("a request of the unmodified oc-helm (%s) not sent:\n%s", wireFile, s)
		}
	}
}

// wireShape describes a request as the plugin builds it, without its values: method, path,
// query keys (limitInfo's value kept), cookie names, the CSRF and Origin headers checked
// against the cookie and host, and the JSON body's keys with their kinds.
func wireShape(r *http.Request, body []byte) string {
	q := r.URL.Query()
	var query []string
	for k := range q {
		v := "*"
		if k == "limitInfo" {
			v = q.Get(k)
		}
		query = append(query, k+"="+v)
	}
	sort.Strings(query)
	var cookies []string
	csrf := ""
	for _, c := range r.Cookies() {
		cookies = append(cookies, c.Name)
		if c.Name == "csrf-token" {
			csrf = c.Value
		}
	}
	sort.Strings(cookies)
	headers := fmt.Sprintf("content-type=%s x-csrftoken=%s origin=%s", r.Header.Get("Content-Type"),
		matches(r.Header.Get("X-CSRFToken"), csrf, "csrf-token"), matches(r.Header.Get("Origin"), "https://"+r.Host, "https://host"))
	return fmt.Sprintf("%s %s?%s cookies=%s %s body=%s", r.Method, r.URL.Path, strings.Join(query, "&"), strings.Join(cookies, ","), headers, bodyShape(body))
}

func matches(got, want, name string) string {
	switch {
	case got == "":
		return "none"
	case got == want:
		return name
	}
	return "other"
}

// bodyShape is a JSON object's keys with the kinds of their values.
func bodyShape(body []byte) string {
	if len(bytes.TrimSpace(body)) == 0 {
		return "none"
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		return "not-an-object"
	}
	var keys []string
	for k, v := range m {
		kind := "string"
		switch v.(type) {
		case nil:
			kind = "null"
		case float64:
			kind = "number"
		case bool:
			kind = "bool"
		case map[string]any:
			kind = "object"
		case []any:
			kind = "array"
		}
		keys = append(keys, k+":"+kind)
	}
	sort.Strings(keys)
	return "{" + strings.Join(keys, ",") + "}"
}
