package events

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
)

// ExtSignature carries the HMAC-SHA256 of an accepted event, keyed with the secret that
// submit and executor share.
const ExtSignature = "asynchelmsig"

// MinSigningKeyBytes is the shortest signing key accepted: HMAC-SHA256 wants a key as long
// as its output, and shorter ones can be searched.
const MinSigningKeyBytes = 32

// PlaceholderSigningKey is the value an earlier manifest shipped. Everyone can read it, so
// it signs nothing.
const PlaceholderSigningKey = "replace-me-with-32-random-bytes"

// CheckSigningKey refuses a key that would let others sign events: empty, shorter than
// MinSigningKeyBytes, or the published placeholder. Every function that signs or verifies
// events calls it before it starts.
func CheckSigningKey(key []byte) error {
	switch {
	case len(key) == 0:
		return fmt.Errorf("EVENT_SIGNING_KEY is not set: without it anyone could sign events (make deploy creates the Secret)")
	case string(key) == PlaceholderSigningKey:
		return fmt.Errorf("EVENT_SIGNING_KEY is the published placeholder %q: create a random key (make deploy does)", PlaceholderSigningKey)
	case len(key) < MinSigningKeyBytes:
		return fmt.Errorf("EVENT_SIGNING_KEY has %d bytes, want at least %d (e.g. openssl rand -hex 32)", len(key), MinSigningKeyBytes)
	}
	return nil
}

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
func Sign(e *cloudevents.Event, key []byte, now time.Time) {
	if e.Time().IsZero() {
		e.SetTime(now)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(canonical(*e)))
	e.SetExtension(ExtSignature, base64.RawURLEncoding.EncodeToString(mac.Sum(nil)))
}

// Verify checks the signature and that the event is not older than maxAge, which bounds
// replays to the window in which a broker may still redeliver (and the executor's
// per-revision check makes a redelivery harmless).
func Verify(e cloudevents.Event, key []byte, now time.Time, maxAge time.Duration) error {
	if err := verifyMAC(e, key); err != nil {
		return err
	}
	if age := now.Sub(e.Time()); age > maxAge || age < -time.Minute {
		return fmt.Errorf("%w: event time %s is outside the %s window (replay?)", ErrSignature, e.Time().Format(time.RFC3339), maxAge)
	}
	return nil
}

// verifyMAC checks e's signature alone, whatever its age.
func verifyMAC(e cloudevents.Event, key []byte) error {
	sig, _ := e.Extensions()[ExtSignature].(string)
	if sig == "" {
		return fmt.Errorf("%w: unsigned", ErrSignature)
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return fmt.Errorf("%w: malformed signature", ErrSignature)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(canonical(e)))
	if !hmac.Equal(got, mac.Sum(nil)) {
		return fmt.Errorf("%w: signature does not match", ErrSignature)
	}
	return nil
}
