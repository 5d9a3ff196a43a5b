package events

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"k8s.io/apimachinery/pkg/types"
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

// bindingText is what the binding's HMAC covers: the request, where it lands, and the UID.
// The "binding" prefix keeps it apart from Sign's canonical form under the same key.
func bindingText(e cloudevents.Event, uid types.UID) string {
	rev := ""
	if v, ok := e.Extensions()[ExtRevision]; ok {
		rev = fmt.Sprint(v)
	}
	return strings.Join([]string{"binding", e.ID(), e.Type(), e.Subject(), rev, string(uid)}, "\n")
}

func bindingMAC(e cloudevents.Event, key []byte, uid types.UID) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(bindingText(e, uid)))
	return mac.Sum(nil)
}

// BindSecret stamps e with the UID of the Secret it was accepted for and the binding's
// HMAC. Sign first: the signature does not cover these two extensions, so binding does not
// change it, and the stored (unbound) copy keeps verifying.
func BindSecret(e *cloudevents.Event, key []byte, uid types.UID) {
	e.SetExtension(ExtSecretUID, string(uid))
	e.SetExtension(ExtBinding, base64.RawURLEncoding.EncodeToString(bindingMAC(*e, key, uid)))
}

// BoundSecret returns the Secret UID a delivered event is bound to, "" for an event that
// carries no binding (the stored copy a sweeper re-sends), and ErrSignature for a binding
// that is malformed or not made with key. Verify the event's signature first.
func BoundSecret(e cloudevents.Event, key []byte) (types.UID, error) {
	uid, _ := e.Extensions()[ExtSecretUID].(string)
	sig, _ := e.Extensions()[ExtBinding].(string)
	switch {
	case uid == "" && sig == "":
		return "", nil
	case uid == "" || sig == "":
		return "", fmt.Errorf("%w: half a secret binding", ErrSignature)
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return "", fmt.Errorf("%w: malformed secret binding", ErrSignature)
	}
	if !hmac.Equal(got, bindingMAC(e, key, types.UID(uid))) {
		return "", fmt.Errorf("%w: secret binding does not match", ErrSignature)
	}
	return types.UID(uid), nil
}
