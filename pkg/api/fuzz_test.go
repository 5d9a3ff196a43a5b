package api

import (
	"encoding/json"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
)

// FuzzDecodeReleaseRequest: whatever the body, decoding and validation never panic, and a
// request that validates has a release name Helm accepts and a chart of an allowed scheme.
func FuzzDecodeReleaseRequest(f *testing.F) {
	f.Add([]byte(`{"name":"web","namespace":"team","chart_url":"https://charts.example.com/web-1.0.0.tgz","values":{"a":1}}`))
	f.Add([]byte(`{"name":"web","namespace":"team","indexEntry":"web--openshift","chart_version":"1.0.0","timeout":"10m"}`))
	f.Add([]byte(`{"name":"../../etc","namespace":"kube-system","chart_url":"file:///etc/passwd"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var r ReleaseRequest
		if err := json.Unmarshal(body, &r); err != nil {
			return
		}
		for _, needChart := range []bool{true, false} {
			if err := r.Validate(needChart); err != nil {
				continue
			}
			if chartutil.ValidateReleaseName(r.Name) != nil {
				t.Fatalf("validated request with release name %q", r.Name)
			}
			if r.ChartURL != "" && !(strings.HasPrefix(r.ChartURL, "http://") || strings.HasPrefix(r.ChartURL, "https://") || strings.HasPrefix(r.ChartURL, "oci://")) {
				t.Fatalf("validated chart URL %q", r.ChartURL)
			}
			if d, err := r.ParsedTimeout(); err != nil || d <= 0 {
				t.Fatalf("validated timeout %q", r.Timeout)
			}
		}
	})
}
