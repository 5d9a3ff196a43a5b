package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/testcharts"
	"github.com/async-helm/async-helm/internal/testsink"
	"github.com/async-helm/async-helm/pkg/api"
	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/events"
)

// grant binds a ClusterRole to dev in ns.
func grant(t *testing.T, ns, clusterRole string) {
	t.Helper()
	bind(t, ns, "ClusterRole", clusterRole)
}

// waitAllowed waits until dev may create secrets in ns.
func waitAllowed(t *testing.T, ns string) {
	t.Helper()
	cluster.WaitDevAllowed(t, ns, "create", "secrets", "")
}

func releaseSecrets(t *testing.T, ns string) int {
	t.Helper()
	secs, err := cluster.Client.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "owner=helm"})
	if err != nil {
		t.Fatal(err)
	}
	return len(secs.Items)
}

func TestCallersAreAuthenticatedAndAuthorized(t *testing.T) {
	s := newStack(t)
	ns := cluster.Namespace(t)
	dev := cluster.Dev.BearerToken
	if dev == "" {
		t.Skip("the kubeconfig has no dev token (not the local cluster)")
	}

	// No credentials, bad credentials: 401.
	for _, tok := range []string{"", "not-a-token"} {
		s.token = tok
		var e api.Error
		if code, _ := s.call(t, http.MethodPost, api.PathAsync, s.install("x", ns), &e); code != http.StatusUnauthorized {
			t.Errorf("token %q: %d %q, want 401", tok, code, e.Error)
		}
		if code, _ := s.call(t, http.MethodGet, api.PathList+"?ns="+ns, nil, nil); code != http.StatusUnauthorized {
			t.Errorf("list with token %q: %d, want 401", tok, code)
		}
	}

	// dev has no rights in ns: 403 naming what is missing, and nothing reserved.
	s.token = dev
	var e api.Error
	code, _ := s.call(t, http.MethodPost, api.PathAsync, s.install("x", ns), &e)
	if code != http.StatusForbidden || !strings.Contains(e.Error, `user "dev" cannot create secrets in namespace "`+ns+`"`) {
		t.Fatalf("dev without rights: %d %q", code, e.Error)
	}
	if n := releaseSecrets(t, ns); n != 0 {
		t.Fatalf("%d release secrets after a refused request", n)
	}
	if code, _ := s.call(t, http.MethodGet, api.PathList+"?ns="+ns, nil, nil); code != http.StatusForbidden {
		t.Errorf("dev lists a namespace it cannot read: %d", code)
	}

	// With edit rights in ns, dev installs; the executor is told who asked (never the token).
	grant(t, ns, "edit")
	code, _ = s.call(t, http.MethodPost, api.PathAsync, s.install("mine", ns), nil)
	if code != http.StatusCreated {
		t.Fatalf("dev with edit rights: %d", code)
	}
	a, err := events.ParseAccepted(s.sink.Events()[0])
	if err != nil {
		t.Fatal(err)
	}
	if a.Caller.User != "dev" || !contains(a.Caller.Groups, "developers") {
		t.Errorf("caller in the event: %+v", a.Caller)
	}
	if strings.Contains(string(s.sink.Events()[0].Data()), dev) {
		t.Error("the user's token is in the event")
	}

	// All namespaces: dev sees only the namespaces it may read.
	other := cluster.Namespace(t)
	s.token = cluster.Operator.BearerToken
	if code, _ := s.call(t, http.MethodPost, api.PathAsync, s.install("hidden", other), nil); code != http.StatusCreated {
		t.Fatal(code)
	}
	s.token = dev
	var rels []map[string]any
	if code, _ := s.call(t, http.MethodGet, api.PathList+"?limitInfo=true", nil, &rels); code != http.StatusOK {
		t.Fatalf("dev lists all namespaces: %d", code)
	}
	// Other packages' tests running meanwhile give dev namespaces of their own (e2e's
	// hostile tenant): what must hold is that the namespace dev may not read stays hidden
	// and its own release is listed, once.
	own := 0
	for _, r := range rels {
		switch r["namespace"] {
		case other:
			t.Errorf("dev sees %v/%v in a namespace it may not read", r["namespace"], r["name"])
		case ns:
			own++
		}
	}
	if own != 1 {
		t.Errorf("dev sees %d releases of its namespace, want its 1 (all it sees: %d)", own, len(rels))
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func TestConsoleSessionCookieNeedsTheCSRFDoubleSubmit(t *testing.T) {
	s := newStack(t)
	ns := cluster.Namespace(t)
	body := `{"name":"web","namespace":"` + ns + `","chart_url":"` + s.charts.ChartURL("tiny", "0.1.0") + `"}`
	post := func(csrfCookie, csrfHeader string) int {
		req, _ := http.NewRequest(http.MethodPost, s.url+api.PathAsync, strings.NewReader(body))
		req.AddCookie(&http.Cookie{Name: "openshift-session-token", Value: cluster.Operator.BearerToken})
		if csrfCookie != "" {
			req.AddCookie(&http.Cookie{Name: "csrf-token", Value: csrfCookie})
		}
		if csrfHeader != "" {
			req.Header.Set("X-CSRFToken", csrfHeader)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("", ""); code != http.StatusForbidden {
		t.Errorf("cookie without CSRF: %d, want 403", code)
	}
	if code := post("abc", "abd"); code != http.StatusForbidden {
		t.Errorf("cookie with mismatched CSRF: %d, want 403", code)
	}
	if code := post("abc", "abc"); code != http.StatusCreated {
		t.Errorf("cookie with CSRF: %d, want 201", code)
	}
}

// ssrfStack is submit with the production chart policy: no loopback, no private ranges,
// except the one address of the test's "internal repository".
func ssrfStack(t *testing.T, allowed string) *stack {
	t.Helper()
	sink := testsink.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := New(Config{SinkConfig: events.SinkConfig{Sink: sink.URL}, Kubeconfig: cluster.Kubeconfig, Authentication: true,
		ChartCacheTTL: time.Hour, Settings: chartsource.Settings{AllowChartAddresses: []string{allowed}}}, zap.NewNop().Sugar(), nil)
	if err := f.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(f.Handler())
	t.Cleanup(srv.Close)
	return &stack{url: srv.URL, sink: sink, token: cluster.Operator.BearerToken}
}

func TestChartURLsCannotReachForbiddenAddresses(t *testing.T) {
	charts := testcharts.Start(t) // on loopback: forbidden
	redirects := map[string]string{
		"/to-loopback":  charts.ChartURL("tiny", "0.1.0"),
		"/to-metadata":  "http://169.254.169.254/latest/meta-data/tiny-0.1.0.tgz",
		"/to-localhost": "http://localhost:1/tiny-0.1.0.tgz",
		"/to-file":      "file:///etc/passwd",
	}
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if to, ok := redirects[r.URL.Path]; ok {
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		http.NotFound(w, r)
	}))
	defer redirector.Close()
	s := ssrfStack(t, redirector.Listener.Addr().(*net.TCPAddr).String())
	ns := cluster.Namespace(t)
	for _, u := range []string{
		charts.ChartURL("tiny", "0.1.0"),
		"http://127.0.0.1:1/tiny-0.1.0.tgz",
		"http://localhost:1/tiny-0.1.0.tgz",
		"http://169.254.169.254/latest/meta-data/",
		"http://[::1]:1/tiny.tgz",
		"http://10.0.0.1/tiny.tgz",
		redirector.URL + "/to-loopback",
		redirector.URL + "/to-metadata",
		redirector.URL + "/to-localhost",
		redirector.URL + "/to-file",
	} {
		var e api.Error
		code, _ := s.call(t, http.MethodPost, api.PathAsync, api.ReleaseRequest{Name: "ssrf", Namespace: ns, ChartURL: u}, &e)
		if code != http.StatusBadRequest || !strings.Contains(e.Error, "not allowed") {
			t.Errorf("%s: %d %q, want 400 not allowed", u, code, e.Error)
		}
	}
	// The allowed address itself is reachable (a 404 there is a 422, not a refusal).
	var e api.Error
	if code, _ := s.call(t, http.MethodPost, api.PathAsync, api.ReleaseRequest{Name: "ssrf", Namespace: ns, ChartURL: redirector.URL + "/nothing.tgz"}, &e); code != http.StatusUnprocessableEntity {
		t.Errorf("allowed address: %d %q, want 422", code, e.Error)
	}
	if n := releaseSecrets(t, ns); n != 0 {
		t.Errorf("%d release secrets after refusals", n)
	}
}
