package events

import (
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/async-helm/async-helm/pkg/release"
)

// The acceptance time is read only from what submit signed for this request and Secret,
// however old it is; a bound (delivered) copy keeps it.
func TestAcceptedAt(t *testing.T) {
	stored := func(change func(e *cloudevents.Event)) []byte {
		e := signed(t)
		change(&e)
		b, err := e.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	asSigned := func(*cloudevents.Event) {}
	secret := release.SecretName("web", 1)
	for _, tc := range []struct {
		name                  string
		event                 []byte
		key                   []byte
		ns, secret, requestID string
		ok                    bool
	}{
		{"as signed", stored(asSigned), key, "ns", secret, "req-1", true},
		{"bound to its Secret", stored(func(e *cloudevents.Event) { BindSecret(e, key, "uid-1") }), key, "ns", secret, "req-1", true},
		{"no event", nil, key, "ns", secret, "req-1", false},
		{"not an event", []byte("{"), key, "ns", secret, "req-1", false},
		{"no key", stored(asSigned), nil, "ns", secret, "req-1", false},
		{"another key", stored(asSigned), []byte("another-key-another-key-another-k"), "ns", secret, "req-1", false},
		{"time moved", stored(func(e *cloudevents.Event) { e.SetTime(t0.Add(time.Hour)) }), key, "ns", secret, "req-1", false},
		{"another request", stored(asSigned), key, "ns", secret, "req-2", false},
		{"another Secret", stored(asSigned), key, "ns", release.SecretName("web", 2), "req-1", false},
		{"another namespace", stored(asSigned), key, "other", secret, "req-1", false},
	} {
		at, ok := AcceptedAt(tc.event, tc.key, tc.ns, tc.secret, tc.requestID)
		if ok != tc.ok || (ok && !at.Equal(t0)) {
			t.Errorf("%s: %s, %v; want ok %v (at %s)", tc.name, at, ok, tc.ok, t0)
		}
	}
}
