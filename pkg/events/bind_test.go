package events

import (
	"errors"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/async-helm/async-helm/pkg/release"
)

func boundEvent(t *testing.T, key []byte) cloudevents.Event {
	t.Helper()
	e, err := NewAccepted(Action{Action: release.ActionInstall, Namespace: "ns", Name: "web", Revision: 1,
		SecretName: release.SecretName("web", 1), RequestID: "req-1"})
	if err != nil {
		t.Fatal(err)
	}
	Sign(&e, key, time.Now())
	BindSecret(&e, key, "uid-1")
	return e
}

// The binding names the Secret and only submit's key makes one; binding a signed event
// leaves its signature valid (the stored copy is the same event without the binding).
func TestBindSecret(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	e := boundEvent(t, key)
	if err := Verify(e, key, time.Now(), time.Hour); err != nil {
		t.Fatalf("a bound event no longer verifies: %v", err)
	}
	if uid, err := BoundSecret(e, key); err != nil || uid != "uid-1" {
		t.Fatalf("BoundSecret = %q, %v", uid, err)
	}
	plain := e.Clone()
	plain.SetExtension(ExtSecretUID, nil)
	plain.SetExtension(ExtBinding, nil)
	if uid, err := BoundSecret(plain, key); err != nil || uid != "" {
		t.Errorf("an unbound event: %q, %v", uid, err)
	}
	for name, mutate := range map[string]func(*cloudevents.Event){
		"another uid":       func(e *cloudevents.Event) { e.SetExtension(ExtSecretUID, "uid-2") },
		"another revision":  func(e *cloudevents.Event) { e.SetExtension(ExtRevision, 2) },
		"half a binding":    func(e *cloudevents.Event) { e.SetExtension(ExtBinding, nil) },
		"malformed binding": func(e *cloudevents.Event) { e.SetExtension(ExtBinding, "%%%") },
		"another key":       func(e *cloudevents.Event) { BindSecret(e, []byte("another key of thirty-two bytes!"), "uid-2") },
	} {
		c := e.Clone()
		mutate(&c)
		if uid, err := BoundSecret(c, key); !errors.Is(err, ErrSignature) {
			t.Errorf("%s: BoundSecret = %q, %v; want ErrSignature", name, uid, err)
		}
	}
}
