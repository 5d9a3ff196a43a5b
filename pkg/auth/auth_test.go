package auth

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// The API server's answers, faked: the tests are about what submit does with them.
func fakeAPI(users map[string]authnv1.UserInfo, allow func(authzv1.SubjectAccessReviewSpec) bool) (*fake.Clientset, *int) {
	cs := fake.NewSimpleClientset()
	reviews := 0
	cs.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tr := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview)
		u, ok := users[tr.Spec.Token]
		tr.Status = authnv1.TokenReviewStatus{Authenticated: ok, User: u}
		return true, tr, nil
	})
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		reviews++
		sar := a.(k8stesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview)
		sar.Status.Allowed = allow(sar.Spec)
		return true, sar, nil
	})
	return cs, &reviews
}

func bearer(token string) *http.Request {
	r, _ := http.NewRequest(http.MethodPost, "/api/helm/release/async", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	return r
}

// A member of system:masters is refused with a reason: the executor would otherwise
// impersonate a group that no RBAC rule limits.
func TestSystemMastersIsRefused(t *testing.T) {
	cs, _ := fakeAPI(map[string]authnv1.UserInfo{
		"admin-token":    {Username: "admin", UID: "admin-uid", Groups: []string{"system:masters", "system:authenticated"}},
		"operator-token": {Username: "system:serviceaccount:ops:operator", Groups: []string{"system:serviceaccounts", "system:authenticated"}},
	}, func(authzv1.SubjectAccessReviewSpec) bool { return true })
	a := &Authenticator{Client: cs}
	for i := 0; i < 2; i++ { // the second time from the cache
		_, err := a.Authenticate(context.Background(), bearer("admin-token"))
		if !errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), "system:masters") {
			t.Fatalf("admin in system:masters (try %d): %v, want forbidden naming the group", i+1, err)
		}
	}
	u, err := a.Authenticate(context.Background(), bearer("operator-token"))
	if err != nil || u.Name != "system:serviceaccount:ops:operator" {
		t.Fatalf("RBAC-bound identity: %v %v", u, err)
	}
}

// A token with scopes (OpenShift puts them in the extra) must not reuse the "allowed" that
// the same user's full token got.
func TestAuthorizationCacheKeysTheWholeIdentity(t *testing.T) {
	const scopes = "scopes.authorization.openshift.io"
	cs, reviews := fakeAPI(nil, func(s authzv1.SubjectAccessReviewSpec) bool {
		return len(s.Extra[scopes]) == 0 // a scoped token may read nothing
	})
	a := &Authorizer{Client: cs}
	need := Need{Verb: "create", Resource: "secrets", Namespace: "team"}
	full := &User{Name: "alice", UID: "alice-uid", Groups: []string{"team"}}
	if err := a.Check(context.Background(), full, need); err != nil {
		t.Fatalf("full token: %v", err)
	}
	if err := a.Check(context.Background(), full, need); err != nil || *reviews != 1 {
		t.Fatalf("full token again: %v after %d reviews, want from the cache", err, *reviews)
	}
	for _, u := range []*User{
		{Name: "alice", UID: "alice-uid", Groups: []string{"team"}, Extra: map[string][]string{scopes: {"user:info"}}},
	} {
		if err := a.Check(context.Background(), u, need); !errors.Is(err, ErrForbidden) {
			t.Errorf("scoped token of the same user: %v, want forbidden (not the cached allow)", err)
		}
	}
	// Each part of the identity is in the key: a change of any asks the API server again.
	before := *reviews
	for _, u := range []*User{
		{Name: "alice", UID: "other-uid", Groups: []string{"team"}},
		{Name: "alice", UID: "alice-uid", Groups: []string{"team", "admins"}},
		{Name: "alice", UID: "alice-uid", Groups: []string{"team"}, Extra: map[string][]string{"authentication.kubernetes.io/pod-name": {"p"}}},
		{Name: "bob", UID: "alice-uid", Groups: []string{"team"}},
	} {
		if err := a.Check(context.Background(), u, need); err != nil {
			t.Fatal(err)
		}
	}
	if got := *reviews - before; got != 4 {
		t.Errorf("%d reviews for 4 identities differing in one part each, want 4", got)
	}
}
