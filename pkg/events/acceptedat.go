package events

import (
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
)

// AcceptedAt is when submit accepted request requestID for Secret namespace/secretName,
// read from the stored accepted event (release.DataEvent) under submit's signature: the
// CloudEvent time, which Sign sets and the signature covers. ok is false for anything else
// (no event, unsigned, another key, another request or Secret). Verify's age window is not
// applied: the time itself is what is asked for, however old.
func AcceptedAt(stored, key []byte, namespace, secretName, requestID string) (at time.Time, ok bool) {
	if len(stored) == 0 || len(key) == 0 {
		return time.Time{}, false
	}
	var e cloudevents.Event
	if err := e.UnmarshalJSON(stored); err != nil || e.Time().IsZero() {
		return time.Time{}, false
	}
	if err := verifyMAC(e, key); err != nil {
		return time.Time{}, false
	}
	a, err := ParseAccepted(e)
	if err != nil || e.ID() != requestID || a.RequestID != requestID ||
		a.Namespace != namespace || a.SecretName != secretName {
		return time.Time{}, false
	}
	return e.Time(), true
}
