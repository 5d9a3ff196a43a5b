package events

import (
	"errors"
	"testing"
	"time"

	"github.com/async-helm/async-helm/pkg/release"
)

// Attack: a namespace editor holds the bound delivery of one request (kept in the pending
// Secret while it ran) and the unbound stored event of a later request of the same release
// and revision (an uninstall and a new install make revision 1 again). It copies the first
// binding (UID and HMAC) onto the second event, bound to the Secret it re-made: the binding
// covers the request id, so it does not verify.
func TestBindingOfOneRequestDoesNotBindAnother(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	first := boundEvent(t, key)
	later, err := NewAccepted(Action{Action: release.ActionInstall, Namespace: "ns", Name: "web", Revision: 1,
		SecretName: release.SecretName("web", 1), RequestID: "req-2"})
	if err != nil {
		t.Fatal(err)
	}
	Sign(&later, key, time.Now())
	later.SetExtension(ExtSecretUID, first.Extensions()[ExtSecretUID])
	later.SetExtension(ExtBinding, first.Extensions()[ExtBinding])
	if err := Verify(later, key, time.Now(), time.Hour); err != nil {
		t.Fatalf("the later event's own signature: %v", err)
	}
	if uid, err := BoundSecret(later, key); !errors.Is(err, ErrSignature) {
		t.Errorf("a binding copied from another request: BoundSecret = %q, %v; want ErrSignature", uid, err)
	}
}
