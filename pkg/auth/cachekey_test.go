package auth

import "testing"

// Two identities or permissions share a cached answer only when they are the same: every
// part counts, and no part can borrow bytes from its neighbour.
func TestCacheKeyTellsIdentitiesApart(t *testing.T) {
	create := Need{Verb: "create", Resource: "secrets", Namespace: "ns"}
	alice := &User{Name: "alice", UID: "1", Groups: []string{"dev", "ops"}, Extra: map[string][]string{"scopes": {"user:full"}}}
	differ := []struct {
		name string
		u    *User
		n    Need
	}{
		{"another name", &User{Name: "alicf", UID: "1", Groups: alice.Groups, Extra: alice.Extra}, create},
		{"name and uid split elsewhere", &User{Name: "alice1", Groups: alice.Groups, Extra: alice.Extra}, create},
		{"another uid", &User{Name: "alice", UID: "2", Groups: alice.Groups, Extra: alice.Extra}, create},
		{"groups joined", &User{Name: "alice", UID: "1", Groups: []string{"devops"}, Extra: alice.Extra}, create},
		{"a group less", &User{Name: "alice", UID: "1", Groups: []string{"dev"}, Extra: alice.Extra}, create},
		{"a group moved into the extra", &User{Name: "alice", UID: "1", Groups: []string{"dev"},
			Extra: map[string][]string{"ops": nil, "scopes": {"user:full"}}}, create},
		{"a scoped token", &User{Name: "alice", UID: "1", Groups: alice.Groups,
			Extra: map[string][]string{"scopes": {"user:info"}}}, create},
		{"no extra", &User{Name: "alice", UID: "1", Groups: alice.Groups}, create},
		{"an extra key more", &User{Name: "alice", UID: "1", Groups: alice.Groups,
			Extra: map[string][]string{"scopes": {"user:full"}, "pod": {"p"}}}, create},
		{"another verb", alice, Need{Verb: "update", Resource: "secrets", Namespace: "ns"}},
		{"another namespace", alice, Need{Verb: "create", Resource: "secrets", Namespace: "ns2"}},
		{"resource and namespace split elsewhere", alice, Need{Verb: "create", Resource: "secretsn", Namespace: "s"}},
		{"a name", alice, Need{Verb: "create", Resource: "secrets", Namespace: "ns", Name: "x"}},
	}
	base := cacheKey(alice, create)
	seen := map[[32]byte]string{base: "alice"}
	for _, d := range differ {
		k := cacheKey(d.u, d.n)
		if other, dup := seen[k]; dup {
			t.Errorf("%s: same key as %s", d.name, other)
		}
		seen[k] = d.name
	}
	same := &User{Name: "alice", UID: "1", Groups: []string{"dev", "ops"},
		Extra: map[string][]string{"scopes": {"user:full"}}}
	if cacheKey(same, create) != base {
		t.Error("the same identity and permission got another key")
	}
	twoKeys := func() *User {
		return &User{Name: "a", Extra: map[string][]string{"x": {"1"}, "y": {"2"}, "z": {"3"}}}
	}
	if cacheKey(twoKeys(), create) != cacheKey(twoKeys(), create) {
		t.Error("the extra's key order changed the key")
	}
}
