package main

import "testing"

// A deployment elects on the Lease the Role names, whether or not it sets NAMESPACES (a name
// derived from NAMESPACES could not be renewed under config/knative's RBAC); stacks sharing
// one cluster separate with LEADER_ELECTION_NAME.
func TestElectionNameIsTheOneTheRoleNames(t *testing.T) {
	for _, c := range []Config{{}, {Namespaces: []string{"a", "b"}}} {
		if n := c.ElectionName(); n != "async-helm-notifier" {
			t.Errorf("NAMESPACES %v: election Lease %q, want async-helm-notifier (config/knative/300-rbac.yaml)", c.Namespaces, n)
		}
	}
	if n := (Config{LeaderElectionName: "x", Namespaces: []string{"a"}}).ElectionName(); n != "x" {
		t.Errorf("LEADER_ELECTION_NAME ignored: %q", n)
	}
}
