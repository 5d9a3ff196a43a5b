package auth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/async-helm/async-helm/internal/fakekube"
)

// apiserver answers TokenReviews from tokens and SubjectAccessReviews from grants, and
// counts them.
type apiserver struct {
	*fake.Clientset
	tokens           map[string]authnv1.UserInfo
	grants           map[string]bool // "<user>/<verb>/<resource>/<namespace>"
	tokenReviews     int
	accessReviews    int
	lastAccessReview authzv1.SubjectAccessReviewSpec
}

func newAPIServer() *apiserver {
	a := &apiserver{Clientset: fake.NewClientset(), grants: map[string]bool{},
		tokens: map[string]authnv1.UserInfo{
			"alice-token": {Username: "alice", UID: "u-a", Groups: []string{"dev"}, Extra: map[string]authnv1.ExtraValue{"scope": {"x"}}},
			"bob-token":   {Username: "bob", UID: "u-b"},
		}}
	a.PrependReactor("create", "tokenreviews", func(act k8stesting.Action) (bool, runtime.Object, error) {
		a.tokenReviews++
		tr := act.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview).DeepCopy()
		if tr.Spec.Token == "broken" {
			return true, nil, errors.New("apiserver unavailable")
		}
		if u, ok := a.tokens[tr.Spec.Token]; ok {
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: u}
		}
		return true, tr, nil
	})
	a.PrependReactor("create", "subjectaccessreviews", func(act k8stesting.Action) (bool, runtime.Object, error) {
		a.accessReviews++
		sar := act.(k8stesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview).DeepCopy()
		a.lastAccessReview = sar.Spec
		r := sar.Spec.ResourceAttributes
		sar.Status.Allowed = a.grants[sar.Spec.User+"/"+r.Verb+"/"+r.Resource+"/"+r.Namespace]
		return true, sar, nil
	})
	return a
}

func request(method string, header map[string]string, cookies map[string]string) *http.Request {
	r := httptest.NewRequest(method, "/api/helm/release/async", nil)
	for k, v := range header {
		r.Header.Set(k, v)
	}
	for k, v := range cookies {
		r.AddCookie(&http.Cookie{Name: k, Value: v})
	}
	return r
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestAuthenticate(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    *http.Request
		user string
		err  error
	}{
		{"bearer token", request("POST", map[string]string{"Authorization": "Bearer alice-token"}, nil), "alice", nil},
		{"not a bearer header", request("POST", map[string]string{"Authorization": "Basic YWxpY2U6cA=="}, nil), "", ErrUnauthenticated},
		{"empty bearer", request("POST", map[string]string{"Authorization": "Bearer "}, nil), "", ErrUnauthenticated},
		{"no credentials", request("POST", nil, nil), "", ErrUnauthenticated},
		{"token the API server rejects", request("GET", map[string]string{"Authorization": "Bearer stolen"}, nil), "", ErrUnauthenticated},
		{"console cookie on a read needs no CSRF", request("GET", nil, map[string]string{SessionCookie: "bob-token"}), "bob", nil},
		{"console cookie on a write without CSRF", request("POST", nil, map[string]string{SessionCookie: "bob-token"}), "", ErrForbidden},
		{"console cookie, CSRF header missing", request("PUT", nil, map[string]string{SessionCookie: "bob-token", CSRFCookie: "c1"}), "", ErrForbidden},
		{"console cookie, CSRF mismatch", request("POST", map[string]string{CSRFHeader: "c2"}, map[string]string{SessionCookie: "bob-token", CSRFCookie: "c1"}), "", ErrForbidden},
		{"console cookie, CSRF empty on both", request("POST", map[string]string{CSRFHeader: ""}, map[string]string{SessionCookie: "bob-token", CSRFCookie: ""}), "", ErrForbidden},
		{"console cookie, CSRF match", request("POST", map[string]string{CSRFHeader: "c1"}, map[string]string{SessionCookie: "bob-token", CSRFCookie: "c1"}), "bob", nil},
		// The bearer header wins over a cookie: no CSRF check applies to it.
		{"bearer beside a cookie", request("POST", map[string]string{"Authorization": "Bearer alice-token"}, map[string]string{SessionCookie: "bob-token"}), "alice", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newAPIServer()
			a := &Authenticator{Client: api}
			u, err := a.Authenticate(ctx(t), tc.r)
			if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
				t.Fatalf("Authenticate: %v, want %v", err, tc.err)
			}
			if tc.err == nil && u.Name != tc.user {
				t.Errorf("user %q, want %q", u.Name, tc.user)
			}
			if errors.Is(tc.err, ErrForbidden) && api.tokenReviews != 0 {
				t.Error("a failed CSRF check still sent the token for review")
			}
		})
	}
}

func TestAuthenticatedUser(t *testing.T) {
	a := &Authenticator{Client: newAPIServer()}
	u, err := a.Authenticate(ctx(t), request("GET", map[string]string{"Authorization": "Bearer alice-token"}, nil))
	if err != nil {
		t.Fatal(err)
	}
	if u.Name != "alice" || u.UID != "u-a" || len(u.Groups) != 1 || u.Extra["scope"][0] != "x" {
		t.Errorf("user %+v", u)
	}
	if _, err := a.Authenticate(ctx(t), request("GET", map[string]string{"Authorization": "Bearer broken"}, nil)); err == nil ||
		errors.Is(err, ErrUnauthenticated) || !strings.Contains(err.Error(), "token review") {
		t.Errorf("an API server error must not read as a rejected token: %v", err)
	}
}

// Answers are cached per token, for TTL.
func TestAuthenticationCache(t *testing.T) {
	api := newAPIServer()
	a := &Authenticator{Client: api, TTL: time.Hour}
	alice := request("GET", map[string]string{"Authorization": "Bearer alice-token"}, nil)
	bob := request("GET", map[string]string{"Authorization": "Bearer bob-token"}, nil)
	for i := 0; i < 3; i++ {
		if u, err := a.Authenticate(ctx(t), alice); err != nil || u.Name != "alice" {
			t.Fatal(u, err)
		}
	}
	if u, err := a.Authenticate(ctx(t), bob); err != nil || u.Name != "bob" {
		t.Fatalf("another token got %v, %v (cache keyed wrongly?)", u, err)
	}
	if api.tokenReviews != 2 {
		t.Errorf("%d token reviews for two tokens", api.tokenReviews)
	}
	// Rejections are not cached as users.
	stolen := request("GET", map[string]string{"Authorization": "Bearer stolen"}, nil)
	for i := 0; i < 2; i++ {
		if _, err := a.Authenticate(ctx(t), stolen); !errors.Is(err, ErrUnauthenticated) {
			t.Fatal(err)
		}
	}
	// An expired entry is reviewed again (a TTL shorter than any two calls).
	short := &Authenticator{Client: api, TTL: time.Nanosecond}
	before := api.tokenReviews
	_, _ = short.Authenticate(ctx(t), alice)
	_, _ = short.Authenticate(ctx(t), alice)
	if api.tokenReviews-before != 2 {
		t.Errorf("%d reviews with an expired cache, want 2", api.tokenReviews-before)
	}
}

func TestAuthorizer(t *testing.T) {
	api := newAPIServer()
	api.grants["alice/create/secrets/team-a"] = true
	a := &Authorizer{Client: api, TTL: time.Hour}
	alice := &User{Name: "alice", UID: "u-a", Groups: []string{"dev"}, Extra: map[string][]string{"scope": {"x"}}}
	create := Need{Verb: "create", Resource: "secrets", Namespace: "team-a"}
	update := Need{Verb: "update", Resource: "secrets", Namespace: "team-a"}

	err := a.Check(ctx(t), alice, create, update)
	if !errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), `user "alice" cannot update secrets in namespace "team-a"`) {
		t.Fatalf("Check: %v", err)
	}
	if s := api.lastAccessReview; s.User != "alice" || s.UID != "u-a" || s.Groups[0] != "dev" || s.Extra["scope"][0] != "x" {
		t.Errorf("the review does not carry the whole identity: %+v", s)
	}
	// Allowed answers are cached; denials are not (a new grant works at once).
	reviews := api.accessReviews
	if err := a.Check(ctx(t), alice, create); err != nil {
		t.Fatal(err)
	}
	if api.accessReviews != reviews {
		t.Error("an allowed answer was not cached")
	}
	api.grants["alice/update/secrets/team-a"] = true
	if err := a.Check(ctx(t), alice, create, update); err != nil {
		t.Errorf("a new grant is not honoured at once: %v", err)
	}
	// The cache key is the whole identity and the whole need.
	for _, other := range []struct {
		u *User
		n Need
	}{
		{&User{Name: "alice", UID: "other-uid", Groups: []string{"dev"}}, create},
		{&User{Name: "alice", UID: "u-a", Groups: []string{"admins"}}, create},
		{alice, Need{Verb: "create", Resource: "secrets", Namespace: "team-b"}},
		{alice, Need{Verb: "delete", Resource: "secrets", Namespace: "team-a"}},
		{&User{Name: "mallory", UID: "u-a", Groups: []string{"dev"}}, create},
	} {
		before := api.accessReviews
		_, _ = a.Allowed(ctx(t), other.u, other.n)
		if api.accessReviews != before+1 {
			t.Errorf("%+v %+v was answered from alice's cache entry", other.u, other.n)
		}
	}
}

func TestAuthorizerAPIError(t *testing.T) {
	api := newAPIServer()
	api.PrependReactor("create", "subjectaccessreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("apiserver unavailable")
	})
	a := &Authorizer{Client: api}
	err := a.Check(ctx(t), &User{Name: "alice"}, Need{Verb: "create", Resource: "secrets", Namespace: "ns"})
	if err == nil || errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), "subject access review") {
		t.Errorf("an API error must not read as a denial: %v", err)
	}
	if ok, err := a.Allowed(ctx(t), &User{Name: "alice"}, Need{Verb: "list", Resource: "secrets", Namespace: "ns"}); ok || err == nil {
		t.Errorf("Allowed = %v, %v", ok, err)
	}
}

// A rejected token is refused from the cache for RejectedTTL: a flood of one bad token
// sends one TokenReview, not one per request, and good tokens are still reviewed.
func TestRejectedTokensCached(t *testing.T) {
	api := newAPIServer()
	clock := fakekube.NewClock(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	a := &Authenticator{Client: api, Clock: clock, RejectedTTL: 10 * time.Second}
	stolen := request("GET", map[string]string{"Authorization": "Bearer stolen"}, nil)
	for i := 0; i < 100; i++ {
		if _, err := a.Authenticate(ctx(t), stolen); !errors.Is(err, ErrUnauthenticated) {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	if api.tokenReviews != 1 {
		t.Errorf("100 requests with one bad token sent %d TokenReviews, want 1", api.tokenReviews)
	}
	if u, err := a.Authenticate(ctx(t), request("GET", map[string]string{"Authorization": "Bearer alice-token"}, nil)); err != nil || u.Name != "alice" {
		t.Errorf("a good token beside the flood: %v, %v", u, err)
	}
	clock.Add(9 * time.Second)
	_, _ = a.Authenticate(ctx(t), stolen)
	if api.tokenReviews != 2 { // the bad one still cached, alice's review
		t.Errorf("%d reviews before the rejection expired, want 2", api.tokenReviews)
	}
	// After RejectedTTL the token is reviewed again: a token the API server now accepts works.
	api.tokens["stolen"] = authnv1.UserInfo{Username: "carol"}
	clock.Add(2 * time.Second)
	if u, err := a.Authenticate(ctx(t), stolen); err != nil || u.Name != "carol" {
		t.Errorf("after RejectedTTL: %v, %v", u, err)
	}
	// API errors are not the token's fault: never cached.
	broken := request("GET", map[string]string{"Authorization": "Bearer broken"}, nil)
	_, _ = a.Authenticate(ctx(t), broken)
	_, _ = a.Authenticate(ctx(t), broken)
	if api.tokenReviews != 5 {
		t.Errorf("%d reviews, want 5 (API errors reviewed each time)", api.tokenReviews)
	}
}

// The caches are bounded: distinct bad tokens evict the least recently used, never grow
// past CacheSize.
func TestTokenCachesBounded(t *testing.T) {
	api := newAPIServer()
	a := &Authenticator{Client: api, CacheSize: 8}
	for i := 0; i < 100; i++ {
		_, _ = a.Authenticate(ctx(t), request("GET", map[string]string{"Authorization": "Bearer bad-" + strconv.Itoa(i)}, nil))
	}
	_, rejected := a.caches()
	if n := len(rejected.Keys()); n != 8 {
		t.Errorf("rejected cache holds %d tokens, want 8", n)
	}
}
