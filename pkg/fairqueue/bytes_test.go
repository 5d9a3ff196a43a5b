package fairqueue

import (
	"context"
	"errors"
	"testing"
)

// More than a tenant's share is refused at once; what finds no room waits (lending first)
// until its context ends; another tenant finds its own share.
func TestBytesAreSharedPerTenant(t *testing.T) {
	m := NewBytes(400)
	alice, bob := Flow{Namespace: "a", Caller: "alice"}, Flow{Namespace: "b", Caller: "bob"}
	if _, err := m.Hold(context.Background(), alice, 101, nil); !errors.Is(err, ErrFull) {
		t.Errorf("a chart over a tenant's share: %v", err)
	}
	free, err := m.Hold(context.Background(), alice, 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for _, f := range []Flow{alice, {Namespace: "a", Caller: "carol"}, {Namespace: "c", Caller: "alice"}} {
		lent := false
		if _, err := m.Hold(ended, f, 1, func() { lent = true }); !errors.Is(err, context.Canceled) || !lent {
			t.Errorf("%+v past its tenant's share: %v (its action slot lent: %v)", f, err, lent)
		}
	}
	if _, err := m.Hold(ended, bob, 100, nil); err != nil {
		t.Errorf("another tenant: %v", err)
	}
	free()
	if _, err := m.Hold(ended, alice, 100, nil); err != nil || m.Used() != 200 {
		t.Errorf("once given back: %v, %d held", err, m.Used())
	}
}
