package release

import (
	"testing"

	"github.com/async-helm/async-helm/pkg/signing"
)

// An identity's keyed digest is the same for the same identity, whatever the order of its
// groups and extra values, and another for any other name, uid, group, extra or key.
func TestIdentityDigest(t *testing.T) {
	key := signing.Key("0123456789abcdef0123456789abcdef")
	alice := Identity{User: "alice", UID: "u", Groups: []string{"a", "b"}, Extra: map[string][]string{"scopes": {"x", "y"}}}
	base := IdentityDigest(key, alice)
	if base == "" {
		t.Fatal("no digest")
	}
	same := Identity{User: "alice", UID: "u", Groups: []string{"b", "a"}, Extra: map[string][]string{"scopes": {"y", "x"}}}
	if got := IdentityDigest(key, same); got != base {
		t.Errorf("reordered groups and extra: %s, want %s", got, base)
	}
	for name, id := range map[string]Identity{
		"another user":   {User: "mallory", UID: "u", Groups: alice.Groups, Extra: alice.Extra},
		"another uid":    {User: "alice", UID: "v", Groups: alice.Groups, Extra: alice.Extra},
		"fewer groups":   {User: "alice", UID: "u", Groups: []string{"a"}, Extra: alice.Extra},
		"another scope":  {User: "alice", UID: "u", Groups: alice.Groups, Extra: map[string][]string{"scopes": {"x"}}},
		"no extra":       {User: "alice", UID: "u", Groups: alice.Groups},
		"group as extra": {User: "alice", UID: "u", Extra: map[string][]string{"groups": {"a", "b"}, "scopes": {"x", "y"}}},
	} {
		if IdentityDigest(key, id) == base {
			t.Errorf("%s: the same digest as alice's", name)
		}
	}
	if IdentityDigest(signing.Key("another key, 32 bytes long......"), alice) == base {
		t.Error("another key: the same digest")
	}
	if IdentityDigest(key, Identity{}) != "" || IdentityDigest(nil, alice) != "" {
		t.Error("a digest without a user or a key")
	}
}
