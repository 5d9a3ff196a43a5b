package events

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/async-helm/async-helm/pkg/signing"

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

// An accepted event is one request: its id, its requestid extension and its payload's
// requestId are the same request id, or the event is refused, however it is signed.
func TestParseAcceptedBindsTheEventToItsRequest(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(e *cloudevents.Event)
	}{
		{"id of another request", func(e *cloudevents.Event) { e.SetID("req-2") }},
		{"request id extension of another request", func(e *cloudevents.Event) { e.SetExtension(ExtRequestID, "req-2") }},
		{"no request id extension", func(e *cloudevents.Event) { e.SetExtension(ExtRequestID, nil) }},
		{"payload of another request", func(e *cloudevents.Event) {
			a := action()
			a.RequestID = "req-2"
			_ = e.SetData(cloudevents.ApplicationJSON, a)
		}},
		{"not a request id", func(e *cloudevents.Event) {
			a := action()
			a.RequestID = "binding\nreq-1"
			_ = e.SetData(cloudevents.ApplicationJSON, a)
			e.SetID(a.RequestID)
			e.SetExtension(ExtRequestID, a.RequestID)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := signed(t)
			c.change(&e)
			Sign(&e, key, t0) // signed as it is: the check is not the signature's
			if _, err := ParseAccepted(e); err == nil || !strings.Contains(err.Error(), "one request id") {
				t.Errorf("ParseAccepted: %v, want refused (not one request id)", err)
			}
		})
	}
	if _, err := ParseAccepted(signed(t)); err != nil {
		t.Errorf("the event as submit makes it: %v", err)
	}
}

// An event signed before v2 (only asynchelmsig, as the old signer wrote it, in the Broker or a
// reservation when the executor is upgraded) still verifies and parses; a binding's
// signature made to look like such an event's does not.
func TestAnEventSignedBeforeV2StillRuns(t *testing.T) {
	old, err := NewAccepted(action())
	if err != nil {
		t.Fatal(err)
	}
	old.SetTime(t0)
	m := hmac.New(sha256.New, key)
	m.Write([]byte(canonical(old)))
	old.SetExtension(ExtSignature, base64.RawURLEncoding.EncodeToString(m.Sum(nil)))
	if err := Verify(old, key, t0.Add(time.Hour), 3*time.Hour); err != nil {
		t.Fatalf("an event signed before v2: %v", err)
	}
	if _, err := ParseAccepted(old); err != nil {
		t.Fatalf("an event signed before v2: %v", err)
	}
	forged := old.Clone()
	forged.SetID("binding")
	rest := strings.TrimPrefix(canonical(forged), "binding\n")
	forged.SetExtension(ExtSignature, signing.Key(key).Sign(signing.Binding, rest))
	if err := Verify(forged, key, t0, 3*time.Hour); err == nil {
		t.Fatal("a binding's signature verifies as an event's")
	}
}
