package main

import (
	"strings"
	"testing"
)

// Notifiers of different namespaces (make run's, each test stack's) elect apart; the pods
// of one notifier, whatever the order of their NAMESPACES, elect together; a notifier of
// every namespace uses the Lease the Role names.
func TestElectionNameSeparatesNotifiersOfOtherNamespaces(t *testing.T) {
	all := Config{}.ElectionName()
	ab := Config{Namespaces: []string{"a", "b"}}.ElectionName()
	ba := Config{Namespaces: []string{"b", "a"}}.ElectionName()
	c := Config{Namespaces: []string{"c"}}.ElectionName()
	if all != "async-helm-notifier" || ab != ba || ab == c || !strings.HasPrefix(ab, all+"-") || len(ab) > 63 {
		t.Errorf("election names: all %q, a,b %q, b,a %q, c %q", all, ab, ba, c)
	}
	if n := (Config{LeaderElectionName: "x", Namespaces: []string{"a"}}).ElectionName(); n != "x" {
		t.Errorf("LEADER_ELECTION_NAME ignored: %q", n)
	}
}
