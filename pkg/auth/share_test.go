package auth

import (
	"fmt"
	"testing"
	"time"
)

// One caller's distinct needs fill only its own share of the cache: 10,001 of them
// emptied every caller's cached answers, so everyone paid a review again.
func TestOneCallersNeedsDoNotEvictAnothersAnswers(t *testing.T) {
	api := newAPIServer()
	api.grants["alice/create/secrets/team-a"] = true
	a := &Authorizer{Client: api, TTL: time.Hour}
	alice, mallory := &User{Name: "alice"}, &User{Name: "mallory"}
	create := Need{Verb: "create", Resource: "secrets", Namespace: "team-a"}
	if err := a.Check(ctx(t), alice, create); err != nil {
		t.Fatal(err)
	}
	for i := range 10002 {
		api.grants[fmt.Sprintf("mallory/get/secrets/ns-%d", i)] = true
		_, _ = a.Allowed(ctx(t), mallory, Need{Verb: "get", Resource: "secrets", Namespace: fmt.Sprint("ns-", i)})
	}
	before := api.accessReviews
	if err := a.Check(ctx(t), alice, create); err != nil {
		t.Fatal(err)
	}
	if api.accessReviews != before {
		t.Errorf("alice's cached answer was evicted by mallory's %d needs: %d more reviews", 10002, api.accessReviews-before)
	}
	// mallory's own answers are bounded: what it keeps is at most its share.
	if n := a.allowedCount(mallory) + a.deniedCount(mallory); n > 2*defaultPerCaller {
		t.Errorf("mallory keeps %d cached answers, want at most %d", n, 2*defaultPerCaller)
	}
}

// A ServiceAccount is a caller of its namespace's share: a namespace editor's many
// ServiceAccounts are one caller.
func TestServiceAccountsShareTheirNamespacesShare(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"system:serviceaccount:ns:one", "system:serviceaccount:ns:two", true},
		{"system:serviceaccount:ns:one", "system:serviceaccount:other:one", false},
		{"alice", "bob", false},
		{"system:serviceaccount:ns", "system:serviceaccount:ns:x", false}, // not a ServiceAccount's name
	} {
		if got := Share(tc.a) == Share(tc.b); got != tc.same {
			t.Errorf("Share(%q) == Share(%q): %v, want %v", tc.a, tc.b, got, tc.same)
		}
	}
}

func (c *shareCache[V]) count(caller string) int {
	if ca, ok := c.by[caller]; ok {
		return len(ca.answers)
	}
	return 0
}

func (a *Authorizer) allowedCount(u *User) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.caches().allowed.count(Share(u.Name))
}

func (a *Authorizer) deniedCount(u *User) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.caches().denied.count(Share(u.Name))
}

func TestShareName(t *testing.T) {
	for _, tc := range []struct{ user, want string }{
		{"alice", "alice"},
		{"system:serviceaccount:team:deployer", "system:serviceaccounts:team"},
		{"system:serviceaccount:team:builder", "system:serviceaccounts:team"},
		{"system:serviceaccount:nocolon", "system:serviceaccount:nocolon"},
		{"", ""},
	} {
		if got := ShareName(tc.user); got != tc.want {
			t.Errorf("ShareName(%q) = %q, want %q", tc.user, got, tc.want)
		}
	}
}
