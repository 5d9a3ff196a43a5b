package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/testcharts"
	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/events"
)

func createAuthSecret(t *testing.T, ns, name, user, pass string) {
	t.Helper()
	if _, err := cluster.Client.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name},
		Data: map[string][]byte{"username": []byte(user), "password": []byte(pass)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func noRepoChartPath(ns, chartURL, secret string) string {
	return api.PathChart + "?" + url.Values{"noRepo": {"true"}, "url": {chartURL}, "namespace": {ns}, "basic_auth_secret_name": {secret}}.Encode()
}

// A chart by URL outside every repository, behind basic auth, installs with the Secret the
// request names (read after the caller's access review); the accepted event carries it for
// the executor, and the chart route answers the same chart.
func TestNoRepoInstallWithBasicAuthSecret(t *testing.T) {
	s := newStack(t)
	charts := testcharts.StartBasicAuth(t, "chartuser", "s3cret")
	ns := cluster.Namespace(t)
	createAuthSecret(t, ns, "chart-auth", "chartuser", "s3cret")
	tiny := charts.ChartURL("tiny", "0.1.0")

	req := api.ReleaseRequest{Name: "web", Namespace: ns, ChartURL: tiny, NoRepo: true, BasicAuthSecretName: "chart-auth",
		Values: map[string]any{"message": "hi"}}
	var e api.Error
	if code, _ := s.call(t, http.MethodPost, api.PathAsync, req, &e); code != http.StatusCreated {
		t.Fatalf("noRepo install with basic auth: %d %q", code, e.Error)
	}
	if charts.Served.Load() == 0 {
		t.Error("the chart server served nothing")
	}
	evs := s.sink.Events()
	if len(evs) != 1 {
		t.Fatalf("%d events, want 1", len(evs))
	}
	a, err := events.ParseAccepted(evs[0])
	if err != nil || !a.Chart.NoRepo || a.Chart.AuthSecret != "chart-auth" || a.Chart.Namespace != ns {
		t.Errorf("accepted event's chart %+v (%v), want noRepo with Secret chart-auth of %s", a.Chart, err, ns)
	}
	// Without the Secret the server's 401 (422), with a URL the console refuses 400.
	req.Name, req.BasicAuthSecretName = "nosecret", ""
	if code, _ := s.call(t, http.MethodPost, api.PathAsync, req, &e); code != http.StatusUnprocessableEntity || !strings.Contains(e.Error, "401") {
		t.Errorf("without the Secret: %d %q, want 422 naming the server's 401", code, e.Error)
	}
	req.Name, req.ChartURL = "badurl", charts.URL+"/tiny"
	if code, _ := s.call(t, http.MethodPost, api.PathAsync, req, &e); code != http.StatusBadRequest || !strings.Contains(e.Error, "must be oci:// or http(s)://*.tgz") {
		t.Errorf("URL the console refuses: %d %q, want 400", code, e.Error)
	}
	req.Name, req.ChartURL, req.BasicAuthSecretName = "missing", tiny, "no-such-secret"
	if code, _ := s.call(t, http.MethodPost, api.PathAsync, req, &e); code != http.StatusBadRequest || !strings.Contains(e.Error, "not found") {
		t.Errorf("missing Secret: %d %q, want 400", code, e.Error)
	}
	// GET /api/helm/chart?noRepo=true: the console's query.
	var ch struct {
		Metadata struct{ Name, Version string } `json:"metadata"`
	}
	if code, _ := s.call(t, http.MethodGet, noRepoChartPath(ns, tiny, "chart-auth"), nil, &ch); code != http.StatusOK || ch.Metadata.Name != "tiny" {
		t.Errorf("chart route: %d %+v", code, ch)
	}
	if code, _ := s.call(t, http.MethodGet, api.PathChart+"?noRepo=true&namespace="+ns, nil, &e); code != http.StatusBadRequest || !strings.Contains(e.Error, "chart URL is required") {
		t.Errorf("chart route without url: %d %q", code, e.Error)
	}
	if n := releaseSecrets(t, ns); n != 1 {
		t.Errorf("%d release secrets, want the one install's", n)
	}
}

// A caller who may write release records but not get the named Secret gets 403, on
// install and on the chart route, and nothing is fetched: the chart server sees no request.
// Once allowed to get that one Secret, the same install is accepted.
func TestNoRepoBasicAuthSecretNeedsTheCallersRightToGetIt(t *testing.T) {
	s := newStack(t)
	if cluster.Dev.BearerToken == "" {
		t.Skip("the kubeconfig has no dev token (not the local cluster)")
	}
	charts := testcharts.StartBasicAuth(t, "chartuser", "s3cret")
	ns := cluster.Namespace(t)
	ctx := context.Background()
	createAuthSecret(t, ns, "chart-auth", "chartuser", "s3cret")
	writer := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "secret-writer"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create", "update"}}}}
	if _, err := cluster.Client.RbacV1().Roles(ns).Create(ctx, writer, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bind(t, ns, "Role", "secret-writer")
	s.token = cluster.Dev.BearerToken
	tiny := charts.ChartURL("tiny", "0.1.0")
	req := api.ReleaseRequest{Name: "web", Namespace: ns, ChartURL: tiny, NoRepo: true, BasicAuthSecretName: "chart-auth"}
	var e api.Error
	if code, _ := s.call(t, http.MethodPost, api.PathAsync, req, &e); code != http.StatusForbidden || !strings.Contains(e.Error, "secrets/chart-auth") {
		t.Fatalf("dev without get on chart-auth: %d %q, want 403 naming secrets/chart-auth", code, e.Error)
	}
	if code, _ := s.call(t, http.MethodGet, noRepoChartPath(ns, tiny, "chart-auth"), nil, &e); code != http.StatusForbidden {
		t.Errorf("chart route as dev: %d %q, want 403", code, e.Error)
	}
	if n := charts.Served.Load() + charts.Refused.Load(); n != 0 {
		t.Errorf("the chart server saw %d requests for a refused caller", n)
	}
	if n := releaseSecrets(t, ns); n != 0 {
		t.Errorf("%d release secrets after a refused install", n)
	}
	reader := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "chart-auth-reader"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: []string{"chart-auth"}}}}
	if _, err := cluster.Client.RbacV1().Roles(ns).Create(ctx, reader, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bind(t, ns, "Role", "chart-auth-reader")
	// The binding reaches the API server's authorizer, and submit's cached review expires,
	// within seconds.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var sec corev1.Secret
		code, _ := s.call(t, http.MethodPost, api.PathAsync, req, &sec)
		if code == http.StatusCreated && sec.Name == "sh.helm.release.v1.web.v1" {
			break
		}
		if code != http.StatusForbidden || time.Now().After(deadline) {
			raw, _ := json.Marshal(sec)
			t.Fatalf("dev allowed to get chart-auth: %d %s", code, raw)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// POST /api/helm/verify: the console's authorization (any authenticated caller) and input
// rule, then 501 with the reason this build has no chart-verifier.
func TestVerifyAnswersAsTheConsoleWithoutAVerifier(t *testing.T) {
	s := newStack(t)
	body := api.VerifyRequest{ChartURL: s.charts.ChartURL("tiny", "0.1.0"), Values: map[string]any{"provider": "developer-console"}}
	var e api.Error
	for _, tc := range []struct {
		token string
		body  any
		code  int
		error string
	}{
		{"", body, http.StatusUnauthorized, "unauthenticated"},
		{cluster.Operator.BearerToken, api.VerifyRequest{ChartURL: "https://charts.example/tiny"}, http.StatusBadRequest, api.VerifyInvalidURL},
		{cluster.Operator.BearerToken, api.VerifyRequest{ChartURL: "tiny--test"}, http.StatusBadRequest, api.VerifyInvalidURL},
		{cluster.Operator.BearerToken, []byte("not json"), http.StatusBadRequest, "invalid request"},
		{cluster.Operator.BearerToken, body, http.StatusNotImplemented, "chart verification is not available: async-helm is built without Red Hat's chart-verifier"},
		{cluster.Operator.BearerToken, api.VerifyRequest{ChartURL: "oci://quay.io/org/chart:1.0.0"}, http.StatusNotImplemented, "chart-verifier"},
	} {
		s.token = tc.token
		e = api.Error{}
		if code, _ := s.call(t, http.MethodPost, api.PathVerify, tc.body, &e); code != tc.code || !strings.Contains(e.Error, tc.error) {
			t.Errorf("%v: %d %q, want %d with %q", tc.body, code, e.Error, tc.code, tc.error)
		}
	}
	s.token = cluster.Operator.BearerToken
	if code, h := s.call(t, http.MethodGet, api.PathVerify, nil, nil); code != http.StatusMethodNotAllowed || h.Get("Allow") != "POST" {
		t.Errorf("GET verify: %d Allow %q, want 405 Allow POST", code, h.Get("Allow"))
	}
}
