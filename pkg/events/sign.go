package events

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/async-helm/async-helm/pkg/signing"
)

// ExtSignatureV2 carries the signature of an accepted event (signing.Event), keyed with the
// secret that submit and executor share; ExtSignature its pre-v2 form (signing.EventV1),
// written beside it for executors and notifiers of the release before, and the only one of
// events signed before (docs/design.md, "Identity").
const (
	ExtSignatureV2 = "asynchelmsig2"
	ExtSignature   = "asynchelmsig"
)

// ErrSignature is an event that is unsigned, altered, signed with another key, or too old
// (a replay).
var ErrSignature = errors.New("event signature check failed")

// canonical is what the signature covers: the event's identity, its time and its payload.
func canonical(e cloudevents.Event) string {
	sum := sha256.Sum256(e.Data())
	ext := func(k string) string {
		if v, ok := e.Extensions()[k]; ok {
			return fmt.Sprint(v)
		}
		return ""
	}
	return strings.Join([]string{e.ID(), e.Type(), e.Source(), e.Subject(), e.Time().UTC().Format(time.RFC3339Nano),
		ext(ExtRevision), ext(ExtRequestID), hex.EncodeToString(sum[:])}, "\n")
}

// Sign stamps e with the current time (if unset) and its signature.
func Sign(e *cloudevents.Event, key signing.Key, now time.Time) {
	if e.Time().IsZero() {
		e.SetTime(now)
	}
	text := canonical(*e)
	e.SetExtension(ExtSignatureV2, key.Sign(signing.Event, text))
	e.SetExtension(ExtSignature, key.Sign(signing.EventV1, text))
}

// Verify checks the signature and that the event is not older than maxAge, which bounds
// replays to the window in which a broker may still redeliver (and the executor's
// per-revision check makes a redelivery harmless).
func Verify(e cloudevents.Event, key signing.Key, now time.Time, maxAge time.Duration) error {
	if err := verifyMAC(e, key); err != nil {
		return err
	}
	if age := now.Sub(e.Time()); age > maxAge || age < -time.Minute {
		return fmt.Errorf("%w: event time %s is outside the %s window (replay?)", ErrSignature, e.Time().Format(time.RFC3339), maxAge)
	}
	return nil
}

// verifyMAC checks e's signature alone, whatever its age: the v2 signature when e carries
// one (never falling back), else the v1 one of an event signed before v2, whose id must then
// be a request id.
func verifyMAC(e cloudevents.Event, key signing.Key) error {
	if sig, _ := e.Extensions()[ExtSignatureV2].(string); sig != "" {
		if !key.Verify(signing.Event, canonical(e), sig) {
			return fmt.Errorf("%w: signature does not match", ErrSignature)
		}
		return nil
	}
	sig, _ := e.Extensions()[ExtSignature].(string)
	switch {
	case sig == "":
		return fmt.Errorf("%w: unsigned", ErrSignature)
	case !IsRequestID(e.ID()):
		return fmt.Errorf("%w: id %.64q is not a request id", ErrSignature, e.ID())
	case !key.Verify(signing.EventV1, canonical(e), sig):
		return fmt.Errorf("%w: signature does not match", ErrSignature)
	}
	return nil
}
