package auth

import (
	"testing"
	"time"

	"github.com/async-helm/async-helm/internal/fakekube"
	"github.com/async-helm/async-helm/internal/testwait"
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

// A caller who lists again and again keeps its denials warm: one used past half its TTL is
// answered from the cache and refreshed behind it, so no list finds every namespace's
// denial expired at once and waits for a review of each. A grant the refresh finds ends it.
func TestDeniedRefreshedAhead(t *testing.T) {
	api := newAPIServer()
	clock := fakekube.NewClock(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	a := &Authorizer{Client: api, TTL: 10 * time.Second, Clock: clock}
	dev := &User{Name: "dev", UID: "u-d"}
	list := Need{Verb: "list", Resource: "secrets", Namespace: "team-a"}
	allowed := func() bool {
		t.Helper()
		ok, err := a.Allowed(ctx(t), dev, list)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if allowed() {
		t.Fatal("allowed without a grant")
	}
	clock.Add(6 * time.Second) // past half the TTL: answered from the cache, refreshed behind it
	if allowed() {
		t.Fatal("allowed without a grant")
	}
	if !testwait.Until(time.Second, func() bool { return a.Counts().Reviews == 2 && a.reviews.aheadDone() }) {
		t.Fatalf("a denial used past half its TTL was not refreshed: %+v", a.Counts())
	}
	clock.Add(6 * time.Second) // 12 s: past the first answer's TTL, within the refreshed one
	if allowed() {
		t.Fatal("allowed without a grant")
	}
	if c := a.Counts(); c.Hits != 2 {
		t.Errorf("at 12 s the list waited for a review: %+v, want 2 hits", c)
	}
	// Past the refreshed denial's half too: refreshed again, until 22 s.
	testwait.For(t, func() bool { return a.Counts().Reviews == 3 && a.reviews.aheadDone() })
	api.grants["dev/list/secrets/team-a"] = true
	clock.Add(6 * time.Second) // 18 s: past that one's half
	if allowed() {
		t.Error("the cached denial was not answered within its TTL")
	}
	testwait.For(t, allowed) // the refresh found the grant and ended the denial
}

// aheadDone: no refresh ahead is in flight (Reviews counts a review when it starts; its
// answer is cached when it ends).
func (r *reviewGroup) aheadDone() bool {
	r.aheadMu.Lock()
	defer r.aheadMu.Unlock()
	return r.aheadRunning == 0
}
