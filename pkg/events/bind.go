package events

import (
	"fmt"
	"strings"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"k8s.io/apimachinery/pkg/types"

	"github.com/async-helm/async-helm/pkg/signing"
)

// ExtSecretUID and ExtBinding bind a delivered accepted event to the reservation Secret
// submit created for it. The event stored in the reservation is signed before the Secret
// exists, so it cannot name the Secret's UID; the copy submit sends once the API server has
// answered carries the UID and submit's HMAC over it. A tenant who swaps the reservation
// (same name, another UID) before an executor runs it cannot make a binding for its own
// Secret (docs/design.md, "Consumed requests").
const (
	ExtSecretUID = "asynchelmsecretuid"
	ExtBinding   = "asynchelmbinding"
)

// bindingText is what the binding's signature (signing.Binding) covers: the request, where
// it lands, and the UID.
func bindingText(e cloudevents.Event, uid types.UID) string {
	rev := ""
	if v, ok := e.Extensions()[ExtRevision]; ok {
		rev = fmt.Sprint(v)
	}
	return strings.Join([]string{e.ID(), e.Type(), e.Subject(), rev, string(uid)}, "\n")
}

// BindSecret stamps e with the UID of the Secret it was accepted for and the binding's
// HMAC. Sign first: the signature does not cover these two extensions, so binding does not
// change it, and the stored (unbound) copy keeps verifying.
func BindSecret(e *cloudevents.Event, key signing.Key, uid types.UID) {
	e.SetExtension(ExtSecretUID, string(uid))
	e.SetExtension(ExtBinding, key.Sign(signing.Binding, bindingText(*e, uid)))
}

// BoundSecret returns the Secret UID a delivered event is bound to, "" for an event that
// carries no binding (the stored copy a sweeper re-sends), and ErrSignature for a binding
// that is malformed or not made with key. Verify the event's signature first.
func BoundSecret(e cloudevents.Event, key signing.Key) (types.UID, error) {
	uid, _ := e.Extensions()[ExtSecretUID].(string)
	sig, _ := e.Extensions()[ExtBinding].(string)
	switch {
	case uid == "" && sig == "":
		return "", nil
	case uid == "" || sig == "":
		return "", fmt.Errorf("%w: half a secret binding", ErrSignature)
	}
	if !key.Verify(signing.Binding, bindingText(e, types.UID(uid)), sig) {
		return "", fmt.Errorf("%w: secret binding does not match", ErrSignature)
	}
	return types.UID(uid), nil
}
