package submitter

import (
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/api"
	chartref "github.com/async-helm/async-helm/pkg/chart/ref"
)

// The basic auth Secret of an install or upgrade, resolved as the console's
// UpgradeReleaseAsync resolves it.
func TestChartRefResolvesTheAuthSecret(t *testing.T) {
	recorded := &helmrelease.Release{Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "tiny", Annotations: map[string]string{
		chartref.AnnotationChartURL: "oci://r.example/tiny", chartref.AnnotationInstallation: chartref.InstallationURL,
		chartref.AnnotationAuthSecret: "recorded"}}}}
	plain := &helmrelease.Release{Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "tiny"}}}
	url := "oci://r.example/tiny:0.2.0"
	for _, tc := range []struct {
		name       string
		req        api.ReleaseRequest
		base       *helmrelease.Release
		wantSecret string
		wantNoRepo bool
	}{
		{"noRepo install with a Secret", api.ReleaseRequest{ChartURL: url, NoRepo: true, BasicAuthSecretName: "s"}, nil, "s", true},
		{"install with a Secret but not noRepo (the console ignores it)", api.ReleaseRequest{ChartURL: url, BasicAuthSecretName: "s"}, nil, "", false},
		{"upgrade reuses the recorded Secret", api.ReleaseRequest{ChartURL: url}, recorded, "recorded", true},
		{"upgrade names another Secret", api.ReleaseRequest{ChartURL: url, BasicAuthSecretName: "other"}, recorded, "other", true},
		{"upgrade clears it", api.ReleaseRequest{ChartURL: url, BasicAuthSecretName: chartref.NoneSecret}, recorded, "", true},
		{"upgrade of a repository release adds one", api.ReleaseRequest{ChartURL: url, BasicAuthSecretName: "s"}, plain, "s", false},
		{"upgrade of a repository release", api.ReleaseRequest{ChartURL: url}, plain, "", false},
		{"upgrade reusing the deployed chart", api.ReleaseRequest{}, recorded, "", false},
		{"upgrade by index entry keeps the repository's credentials", api.ReleaseRequest{IndexEntry: "tiny--r", ChartURL: url}, recorded, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Namespace = "team-a"
			ref := chartRef(tc.req, tc.base)
			if ref.AuthSecret != tc.wantSecret || ref.NoRepo != tc.wantNoRepo {
				t.Errorf("ref %+v, want Secret %q noRepo %v", ref, tc.wantSecret, tc.wantNoRepo)
			}
		})
	}
}
