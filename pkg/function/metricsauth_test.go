package function

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// Attack: /metrics answered anyone who reached a function's port: the notifier's named
// every namespace's queue size and oldest age. Only a caller the API server authenticates
// and allows "get" on the non-resource URL /metrics reads it.
func TestMetricsServeOnlyAnAuthorizedScraper(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tr := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview)
		users := map[string]string{"prom-token": "system:serviceaccount:monitoring:prometheus", "tenant-token": "mallory"}
		if name, ok := users[tr.Spec.Token]; ok {
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: name}}
		}
		return true, tr, nil
	})
	var reviews []authzv1.SubjectAccessReviewSpec
	client.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview)
		reviews = append(reviews, sar.Spec)
		na := sar.Spec.NonResourceAttributes
		sar.Status.Allowed = na != nil && na.Path == "/metrics" && na.Verb == "get" && strings.HasSuffix(sar.Spec.User, ":prometheus")
		return true, sar, nil
	})
	m := newMetrics("notifier")
	m.guard = NewMetricsGuard(client)
	h := m.instrument(http.NewServeMux())
	for _, tc := range []struct {
		token string
		want  int
	}{{"", http.StatusUnauthorized}, {"forged", http.StatusUnauthorized}, {"tenant-token", http.StatusForbidden},
		{"prom-token", http.StatusOK}, {"prom-token", http.StatusOK}} {
		r := httptest.NewRequest("GET", "/metrics", nil)
		if tc.token != "" {
			r.Header.Set("Authorization", "Bearer "+tc.token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Code != tc.want {
			t.Errorf("token %q: %d, want %d", tc.token, rec.Code, tc.want)
		}
		if tc.want != http.StatusOK && strings.Contains(rec.Body.String(), "asynchelm_") {
			t.Errorf("token %q read the metrics", tc.token)
		}
	}
	if len(reviews) != 2 {
		t.Errorf("%d access reviews, want 2 (the scraper's allowed answer is kept)", len(reviews))
	}
}
