package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/satoken"
	"github.com/async-helm/async-helm/internal/testcharts/hostile"
	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/release"
)

// diffOf is an upgrade's diff request of release name in ns to tiny with values.
func (s *stack) diffOf(name, ns string, values map[string]any) api.DiffRequest {
	r := s.install(name, ns)
	r.Values = values
	return api.DiffRequest{ReleaseRequest: r}
}

// POST /api/helm/release/diff answers the changes of an upgrade against the deployed
// revision, reserving nothing; refusals have the status of the action they preview.
func TestDiffRoute(t *testing.T) {
	s := newStack(t)
	ns := cluster.Namespace(t)
	if code, _ := s.call(t, http.MethodPost, api.PathAsync, s.install("web", ns), nil); code != http.StatusCreated {
		t.Fatal(code)
	}
	store := &release.Store{Client: cluster.Client}
	if _, err := markDeployed(store, ns, "web", 1); err != nil {
		t.Fatal(err)
	}
	var d api.Diff
	if code, _ := s.call(t, http.MethodPost, api.PathDiff, s.diffOf("web", ns, map[string]any{"message": "new"}), &d); code != http.StatusOK {
		t.Fatalf("diff: %d %+v", code, d)
	}
	var got []string
	for _, c := range d.Changes {
		got = append(got, c.Change+" "+c.Key())
	}
	// The reservation's record has no manifest: everything the chart renders is added, as
	// the upgrade renders it (its Job is named after .Release.Revision, 2).
	want := "ADD " + ns + ", web, Deployment (apps)|ADD " + ns + ", web-config, ConfigMap (v1)|ADD " + ns + ", web-migrate-2, Job (batch)"
	if strings.Join(got, "|") != want || d.From != 1 || d.To != 2 || !strings.Contains(d.Changes[1].Diff, `+  message: "new"`) {
		t.Errorf("diff %+v\nchanges %s\nwant %s", d, strings.Join(got, "|"), want)
	}

	endless := serveArchive(t, hostile.Endless(t))
	for _, c := range []struct {
		name  string
		token string
		body  any
		want  int
		says  string
	}{
		{"malformed JSON", "", []byte(`{"name":`), 400, "not a JSON"},
		{"bad action", "", api.DiffRequest{Action: "delete", ReleaseRequest: s.install("web", ns)}, 400, "action"},
		{"bad name", "", s.diffOf("Bad_Name", ns, nil), 400, "release name"},
		{"no rights", cluster.Dev.BearerToken, s.diffOf("web", ns, nil), 403, "forbidden"},
		{"no release", "", s.diffOf("ghost", ns, nil), 404, "not found"},
		{"no namespace", "", s.diffOf("web", "no-such-ns", nil), 404, "namespace"},
		{"install of a name in use", "", api.DiffRequest{Action: "install", ReleaseRequest: s.install("web", ns)}, 409, "in use"},
		{"too large", "", s.diffOf("web", ns, map[string]any{"blob": strings.Repeat("x", api.MaxBodyBytes)}), 413, "too large"},
		{"values against the schema", "", s.diffOf("web", ns, map[string]any{"replicas": "many"}), 422, "replicas"},
		{"render past its bound", "", api.DiffRequest{ReleaseRequest: api.ReleaseRequest{Name: "web", Namespace: ns, ChartURL: endless}}, 422, "did not render in time"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.token == "" && c.name == "no rights" {
				t.Skip("the kubeconfig has no dev token (not the local cluster)")
			}
			s.token = cluster.Operator.BearerToken
			if c.token != "" {
				s.token = c.token
			}
			var e api.Error
			if code, _ := s.call(t, http.MethodPost, api.PathDiff, c.body, &e); code != c.want || !strings.Contains(e.Error, c.says) {
				t.Errorf("got %d %q, want %d containing %q", code, e.Error, c.want, c.says)
			}
		})
	}
	if n := releaseSecrets(t, ns); n != 1 || len(s.sink.Events()) != 1 {
		t.Errorf("after the diffs: %d release records, %d events; want the install's only", n, len(s.sink.Events()))
	}
}

// Past the chart routes' burst, a diff is 429 with Retry-After, as the template route.
func TestDiffRouteIsLimitedPerCaller(t *testing.T) {
	s := newStackWith(t, func(c *Config) { c.ChartRoutesRate, c.ChartRoutesBurst = 0.01, 1 })
	ns := cluster.Namespace(t)
	if code, _ := s.call(t, http.MethodPost, api.PathDiff, s.diffOf("ghost", ns, nil), nil); code != http.StatusNotFound {
		t.Fatalf("within the burst: %d, want 404", code)
	}
	if code, h := s.call(t, http.MethodPost, api.PathDiff, s.diffOf("ghost", ns, nil), nil); code != http.StatusTooManyRequests || h.Get("Retry-After") == "" {
		t.Errorf("past the burst: %d Retry-After %q, want 429 with Retry-After", code, h.Get("Retry-After"))
	}
}

// The rate is the tenant's: the ServiceAccounts of one namespace share one bucket, as they
// share the render slots (auth.ShareName), so a tenant does not multiply its diffs by
// creating ServiceAccounts.
func TestDiffRouteIsLimitedPerTenant(t *testing.T) {
	s := newStackWith(t, func(c *Config) { c.ChartRoutesRate, c.ChartRoutesBurst = 0.01, 1 })
	ns := cluster.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var tokens []string
	for _, name := range []string{"pipeline-a", "pipeline-b"} {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if _, err := cluster.Client.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		token, err := satoken.Request(ctx, cluster.Client, ns, name, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, token)
	}
	// Neither may read releases: within the bucket a 403, past it a 429.
	s.token = tokens[0]
	if code, _ := s.call(t, http.MethodPost, api.PathDiff, s.diffOf("ghost", ns, nil), nil); code != http.StatusForbidden {
		t.Fatalf("the first ServiceAccount within the burst: %d, want 403", code)
	}
	s.token = tokens[1]
	if code, h := s.call(t, http.MethodPost, api.PathDiff, s.diffOf("ghost", ns, nil), nil); code != http.StatusTooManyRequests || h.Get("Retry-After") == "" {
		t.Errorf("another ServiceAccount of the namespace: %d Retry-After %q, want 429 with Retry-After", code, h.Get("Retry-After"))
	}
}
