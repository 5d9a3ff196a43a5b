package auth

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/async-helm/async-helm/internal/fakekube"
)

// An answer is as old as the review that asked for it: a review the API server took 8 s to
// answer (shared reviews wait up to 30 s) is trusted for the TTL from when it was sent,
// not from when it came back, so a revoked token or grant is never honoured past the TTL.
func TestSlowReviewTrustedForTTLFromItsSending(t *testing.T) {
	api := newAPIServer()
	api.grants["alice/create/secrets/team-a"] = true
	clock := fakekube.NewClock(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	slow := func(k8stesting.Action) (bool, runtime.Object, error) {
		clock.Add(8 * time.Second)
		return false, nil, nil
	}
	api.PrependReactor("create", "subjectaccessreviews", slow)
	api.PrependReactor("create", "tokenreviews", slow)

	authz := &Authorizer{Client: api, Clock: clock, TTL: 10 * time.Second}
	alice := &User{Name: "alice"}
	create := Need{Verb: "create", Resource: "secrets", Namespace: "team-a"}
	if err := authz.Check(ctx(t), alice, create); err != nil {
		t.Fatal(err)
	}
	clock.Add(3 * time.Second) // 11 s after the review was sent
	if err := authz.Check(ctx(t), alice, create); err != nil {
		t.Fatal(err)
	}
	if api.accessReviews != 2 {
		t.Errorf("%d access reviews: an answer 11 s old was trusted with a 10 s TTL", api.accessReviews)
	}

	authn := &Authenticator{Client: api, Clock: clock, TTL: 10 * time.Second}
	req := request("GET", map[string]string{"Authorization": "Bearer alice-token"}, nil)
	if _, err := authn.Authenticate(ctx(t), req); err != nil {
		t.Fatal(err)
	}
	clock.Add(3 * time.Second)
	if _, err := authn.Authenticate(ctx(t), req); err != nil {
		t.Fatal(err)
	}
	if api.tokenReviews != 2 {
		t.Errorf("%d token reviews: an answer 11 s old was trusted with a 10 s TTL", api.tokenReviews)
	}
}
