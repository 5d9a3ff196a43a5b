package api

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	chartref "github.com/async-helm/async-helm/pkg/chart/ref"
	"github.com/async-helm/async-helm/pkg/verify"
)

var update = flag.Bool("update", false, "rewrite testdata/shapes/*.json")

// golden compares v's indented JSON with testdata/shapes/<name>.json (-update rewrites it).
func golden(t *testing.T, name string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", "shapes", name+".json")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./pkg/api -run %s -update writes it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from %s:\n%s", name, path, got)
	}
}

// The console's bodies (openshift/console pkg/helm/handlers/request.go HelmRequest and
// HelmVerifierRequest) decode into ours with every field, and encode back to the same shape.
func TestNoRepoAndVerifyShapes(t *testing.T) {
	for name, body := range map[string]string{
		"install-norepo-basic-auth.request": `{"name":"web","namespace":"team-a","chart_url":"oci://registry.example/charts/tiny:0.1.0",
			"chart_version":"0.1.0","values":{"replicas":2},"noRepo":true,"basic_auth_secret_name":"chart-auth"}`,
		"upgrade-clear-auth-secret.request": `{"name":"web","namespace":"team-a","chart_url":"https://charts.example/tiny-0.2.0.tgz",
			"values":{},"basic_auth_secret_name":"__none__"}`,
	} {
		var r ReleaseRequest
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatal(err)
		}
		if err := r.Validate(strings.HasPrefix(name, "install")); err != nil {
			t.Errorf("%s refused: %v", name, err)
		}
		golden(t, name, r)
		golden(t, strings.TrimSuffix(name, ".request")+".event-chart", r.Chart())
	}
	var v VerifyRequest
	if err := json.Unmarshal([]byte(`{"chart_url":"https://charts.example/tiny-0.1.0.tgz","values":{"provider":"developer-console"}}`), &v); err != nil {
		t.Fatal(err)
	}
	if err := v.Validate(); err != nil {
		t.Errorf("verify refused: %v", err)
	}
	golden(t, "verify.request", v)
	golden(t, "verify-invalid-url.answer-400", Error{Error: VerifyInvalidURL})
	golden(t, "verify-unavailable.answer-501", Error{Error: unavailable()})
}

func TestNoRepoValidate(t *testing.T) {
	ok := func() ReleaseRequest {
		return ReleaseRequest{Name: "web", Namespace: "team-a", ChartURL: "https://charts.example/tiny-1.0.0.tgz", NoRepo: true, BasicAuthSecretName: "chart-auth"}
	}
	for _, tc := range []struct {
		name    string
		change  func(r *ReleaseRequest)
		install bool
		err     string
	}{
		{"noRepo install with a Secret", func(*ReleaseRequest) {}, true, ""},
		{"noRepo oci install", func(r *ReleaseRequest) { r.ChartURL = "oci://registry.example/charts/tiny" }, true, ""},
		{"noRepo without chart_url", func(r *ReleaseRequest) { r.ChartURL = "" }, true, "chart_url"},
		{"noRepo with a URL the console refuses", func(r *ReleaseRequest) { r.ChartURL = "https://charts.example/tiny" }, true, "must be oci:// or http(s)://*.tgz"},
		{"noRepo with an index entry", func(r *ReleaseRequest) { r.IndexEntry = "tiny--local" }, true, "indexEntry"},
		{"Secret name not a name", func(r *ReleaseRequest) { r.BasicAuthSecretName = "../x" }, true, "basic_auth_secret_name"},
		{"__none__ on an install", func(r *ReleaseRequest) { r.BasicAuthSecretName = chartref.NoneSecret }, true, "basic_auth_secret_name"},
		{"__none__ on an upgrade", func(r *ReleaseRequest) { r.BasicAuthSecretName, r.NoRepo = chartref.NoneSecret, false }, false, ""},
		{"__none__ on an upgrade without a chart", func(r *ReleaseRequest) { r.BasicAuthSecretName, r.NoRepo, r.ChartURL = chartref.NoneSecret, false, "" }, false, "name the chart"},
		{"a Secret with an index entry", func(r *ReleaseRequest) { r.NoRepo, r.ChartURL, r.IndexEntry = false, "", "tiny--local" }, false, "not by indexEntry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ok()
			tc.change(&r)
			err := r.Validate(tc.install)
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("error %v, want one containing %q", err, tc.err)
			}
		})
	}
}

// Only a noRepo chart carries the Secret in its reference (an upgrade's is resolved by the
// submitter against its release); __none__ never reaches the chart source.
func TestChartOfNoRepo(t *testing.T) {
	r := ReleaseRequest{Namespace: "a", ChartURL: "oci://r.example/c", BasicAuthSecretName: "s"}
	if c := r.Chart(); c.AuthSecret != "" || c.NoRepo {
		t.Errorf("not noRepo: %+v", c)
	}
	r.NoRepo = true
	if c := r.Chart(); c.AuthSecret != "s" || !c.NoRepo || c.Namespace != "a" {
		t.Errorf("noRepo: %+v", c)
	}
	r.BasicAuthSecretName = chartref.NoneSecret
	if c := r.Chart(); c.AuthSecret != "" {
		t.Errorf("__none__: %+v", c)
	}
}

func unavailable() string {
	_, err := verify.Unavailable{Reason: verify.Reason}.Verify(context.Background(), "", nil)
	return err.Error()
}
