package ref

import (
	"errors"
	"strings"
	"testing"
)

// The console's IsValidChartURL cases (openshift/console pkg/helm/actions, OCPBUGS-90080).
func TestIsChartArchiveURL(t *testing.T) {
	for raw, want := range map[string]bool{
		"oci://quay.io/org/chart":                           true,
		"oci://quay.io/org/chart:1.0.0":                     true,
		"oci://registry.example:5000/charts/tiny":           true,
		"OCI://QUAY.IO/org/chart":                           true,
		"https://charts.example/tiny-1.0.0.tgz":             true,
		"http://127.0.0.1:8080/tiny-0.1.0.tgz":              true,
		"https://example.com/charts/argo-cd-9.4.1.tar.gz":   true,
		"https://charts.example/tiny-1.0.0.zip":             false,
		"https://charts.example/":                           false,
		"https://charts.example/index.yaml":                 false,
		"https://user:pass@charts.example/tiny-1.0.0.tgz":   false,
		"ftp://charts.example/tiny-1.0.0.tgz":               false,
		"file:///etc/passwd.tgz":                            false,
		"oci://":                                            false,
		"oci://-bad-.example/chart":                         false,
		"tiny--local":                                       false,
		"":                                                  false,
		"https://charts.example/tiny-1.0.0.tgz?token=x.tgz": true,
	} {
		if got := IsChartArchiveURL(raw); got != want {
			t.Errorf("IsChartArchiveURL(%q) = %v, want %v", raw, got, want)
		}
	}
}

func TestNoRepoRefValidate(t *testing.T) {
	for _, tc := range []struct {
		ref Ref
		err string // "" = valid
	}{
		{Ref{URL: "oci://registry.example/charts/tiny", NoRepo: true}, ""},
		{Ref{URL: "https://charts.example/tiny-1.0.0.tgz", NoRepo: true, AuthSecret: "chart-auth", Namespace: "team-a"}, ""},
		{Ref{URL: "https://charts.example/tiny-1.0.0.tgz", AuthSecret: "chart-auth", Namespace: "team-a"}, ""},
		{Ref{URL: "https://charts.example/tiny", NoRepo: true}, "must be oci:// or http(s)://*.tgz"},
		{Ref{URL: "https://u:p@charts.example/tiny-1.0.0.tgz", NoRepo: true}, "REDACTED"},
		{Ref{IndexEntry: "tiny--local", NoRepo: true}, "not by indexEntry"},
		{Ref{URL: "https://charts.example/tiny-1.0.0.tgz", NoRepo: true, AuthSecret: "Bad_Name", Namespace: "a"}, "basic_auth_secret_name"},
		{Ref{URL: "https://charts.example/tiny-1.0.0.tgz", NoRepo: true, AuthSecret: NoneSecret, Namespace: "a"}, "basic_auth_secret_name"},
		{Ref{URL: "https://charts.example/tiny-1.0.0.tgz", NoRepo: true, AuthSecret: "chart-auth"}, "needs the namespace"},
	} {
		err := tc.ref.Validate()
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%+v refused: %v", tc.ref, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, ErrInvalid)):
			t.Errorf("%+v: %v, want ErrInvalid containing %q", tc.ref, err, tc.err)
		}
		if err != nil && strings.Contains(err.Error(), ":p@") {
			t.Errorf("credentials in %v", err)
		}
	}
}
