package auth

import (
	"testing"
	"time"

	"github.com/async-helm/async-helm/internal/fakekube"
)

// A list filters namespaces with Allowed: a denial is cached for TTL there, so a caller who
// repeats an all-namespaces list does not make submit send one review per namespace it may
// not read on every request (1,000 namespaces holding records: 1,000 reviews a list). Check
// (what a request needs to change something) still never reuses a denial, and a grant
// found by either ends the cached denial.
func TestAllowedCachesDenialsForLists(t *testing.T) {
	api := newAPIServer()
	clock := fakekube.NewClock(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	a := &Authorizer{Client: api, TTL: 10 * time.Second, Clock: clock}
	dev := &User{Name: "dev", UID: "u-d"}
	list := Need{Verb: "list", Resource: "secrets", Namespace: "team-a"}
	for i := 0; i < 3; i++ {
		if ok, err := a.Allowed(ctx(t), dev, list); ok || err != nil {
			t.Fatalf("Allowed: %v %v", ok, err)
		}
	}
	if api.accessReviews != 1 {
		t.Errorf("%d reviews for three lists within the TTL, want 1", api.accessReviews)
	}
	api.grants["dev/list/secrets/team-a"] = true
	if err := a.Check(ctx(t), dev, list); err != nil {
		t.Errorf("Check reused a cached denial: %v", err)
	}
	if ok, _ := a.Allowed(ctx(t), dev, list); !ok {
		t.Error("a grant Check found did not end the cached denial")
	}
	delete(api.grants, "dev/list/secrets/team-a")
	other := Need{Verb: "list", Resource: "secrets", Namespace: "team-b"}
	_, _ = a.Allowed(ctx(t), dev, other)
	api.grants["dev/list/secrets/team-b"] = true
	clock.Add(11 * time.Second)
	if ok, _ := a.Allowed(ctx(t), dev, other); !ok {
		t.Error("a new grant is not seen by a list after the TTL")
	}
}
