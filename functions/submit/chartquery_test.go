package main

import (
	"net/http/httptest"
	"testing"

	"github.com/async-helm/async-helm/pkg/api"
)

// A noRepo chart is charged to the namespace its query names only when a basic auth Secret
// there is read for the caller (reviewed); without one the chart is the URL's, its caller's
// alone: a namespace named but never reviewed is dropped (review 6, J8).
func TestNoRepoChartQueryKeepsOnlyAReviewedNamespace(t *testing.T) {
	for _, tc := range []struct{ query, want string }{
		{"noRepo=true&url=https://c.example/a.tgz&namespace=team-b", ""},
		{"noRepo=true&url=https://c.example/a.tgz&namespace=team-b&basic_auth_secret_name=auth", "team-b"},
		{"noRepo=true&url=https://c.example/a.tgz&basic_auth_secret_name=auth", "default"},
		{"url=https://c.example/a.tgz&namespace=team-b", "team-b"},
	} {
		ref, err := chartQuery(httptest.NewRequest("GET", api.PathChart+"?"+tc.query, nil))
		if err != nil || ref.Namespace != tc.want {
			t.Errorf("%s: namespace %q (%v), want %q", tc.query, ref.Namespace, err, tc.want)
		}
	}
}
