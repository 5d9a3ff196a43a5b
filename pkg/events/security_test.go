package events

import (
	"strings"
	"testing"

	chartref "github.com/async-helm/async-helm/pkg/chart/ref"
	"github.com/async-helm/async-helm/pkg/release"
)

func accepted(t *testing.T, c Caller) Action {
	t.Helper()
	a := Action{Action: release.ActionInstall, Namespace: "team", Name: "web", Revision: 1,
		SecretName: release.SecretName("web", 1), Chart: chartref.Ref{URL: "https://charts.example.com/web-1.0.0.tgz"},
		Caller: c, RequestID: "req-1"}
	e, err := NewAccepted(a)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseAccepted(e)
	if err != nil {
		return Action{Caller: Caller{User: "refused: " + err.Error()}}
	}
	return got
}

// A signed event naming system:masters is refused where every accepted event is parsed,
// so the executor never impersonates the group that bypasses authorization.
func TestParseAcceptedRefusesSystemMasters(t *testing.T) {
	got := accepted(t, Caller{User: "mallory", Groups: []string{"system:authenticated", "system:masters"}})
	if !strings.Contains(got.Caller.User, "refused") || !strings.Contains(got.Caller.User, "system:masters") {
		t.Fatalf("caller in system:masters: %+v, want refused naming the group", got.Caller)
	}
	ok := accepted(t, Caller{User: "dev", Groups: []string{"developers", "system:authenticated"}})
	if ok.Caller.User != "dev" {
		t.Fatalf("ordinary caller: %+v", ok.Caller)
	}
	if none := accepted(t, Caller{}); strings.Contains(none.Caller.User, "refused") {
		t.Fatalf("no caller (authentication off): %+v", none.Caller)
	}
}

// Uninstall and install again makes a new revision 1: its status events must not carry
// the ids of the old one's, or subscribers that de-duplicate by id drop them.
func TestStatusEventIDsDifferPerIncarnation(t *testing.T) {
	first, err := NewStatus(StatusChange{Namespace: "team", Name: "web", Revision: 1, Status: "deployed", RequestID: "req-a"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := NewStatus(StatusChange{Namespace: "team", Name: "web", Revision: 1, Status: "deployed", RequestID: "req-a"})
	if err != nil {
		t.Fatal(err)
	}
	second, err := NewStatus(StatusChange{Namespace: "team", Name: "web", Revision: 1, Status: "deployed", RequestID: "req-b"})
	if err != nil {
		t.Fatal(err)
	}
	if first.ID() != again.ID() {
		t.Errorf("one transition, two ids: %s %s", first.ID(), again.ID())
	}
	if first.ID() == second.ID() {
		t.Errorf("two incarnations of revision 1 share the id %s", first.ID())
	}
	if want := "team/web/v1/deployed/req-a"; first.ID() != want {
		t.Errorf("id %s, want %s", first.ID(), want)
	}
}
