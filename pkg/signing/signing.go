// Package signing is async-helm's one HMAC: the key submit, the executor and the notifier
// share, and the purposes it signs, each apart from the others by its own prefix.
package signing

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
)

// Key is the event signing key (EVENT_SIGNING_KEY). An empty Key signs nothing: callers
// check Set before they sign or require a signature.
type Key []byte

// Set reports whether k can sign.
func (k Key) Set() bool { return len(k) > 0 }

// Purpose is what a signature is for: the prefix of the text its HMAC covers, how many bytes
// of the HMAC it keeps, and how they are written.
type Purpose struct {
	prefix string
	bytes  int
	hex    bool
}

// The purposes: each text starts with its own prefix, none a prefix of another's text.
var (
	// Event signs an accepted event's canonical form (events.ExtSignatureV2).
	Event = Purpose{prefix: "async-helm event v2\n", bytes: sha256.Size}
	// EventV1 is how events were signed before Event had a prefix (events.ExtSignature): its
	// text starts with the event's id, so it is verified only for an id that is a request id
	// (events.Verify). Written and accepted for one release more, for events in flight.
	EventV1 = Purpose{prefix: "", bytes: sha256.Size}
	// Binding binds a delivered event to the Secret submit accepted it for (events.ExtBinding).
	Binding = Purpose{prefix: "binding\n", bytes: sha256.Size}
	// Record seals a queued release record for the request it was reserved for (the
	// async-helm.io/seal label: 40 hex characters, within a label value's 63).
	Record = Purpose{prefix: "async-helm seal\n", bytes: 20, hex: true}
	// Cancel signs a cancel request on a running revision's Lease for the request it stops.
	Cancel = Purpose{prefix: "async-helm cancel v2\x00", bytes: sha256.Size, hex: true}
	// Deployer seals who wrote a release record's hooks (release.DataDeployer).
	Deployer = Purpose{prefix: "async-helm deployer v2\x00", bytes: sha256.Size, hex: true}
	// Identity is the keyed digest of an identity a Deployer seal names (release.IdentityDigest):
	// the uninstall compares digests, and the record shows no one's name, groups or scopes.
	Identity = Purpose{prefix: "async-helm identity v1\x00", bytes: sha256.Size, hex: true}
	// Notified signs the notifier's mark of a reported status (async-helm.io/notified-sig).
	Notified = Purpose{prefix: "async-helm notified v1\x00", bytes: 20}
)

// purposes are all of them, for the check that keeps EventV1 apart (Verify).
var purposes = []Purpose{Event, Binding, Record, Cancel, Deployer, Identity, Notified}

// apart reports whether text, signed for p, cannot be another purpose's signed text: always
// for a purpose with a prefix; for EventV1 only a text with no other purpose's prefix.
func (p Purpose) apart(text string) bool {
	if p.prefix != "" {
		return true
	}
	for _, q := range purposes {
		if strings.HasPrefix(text, q.prefix) {
			return false
		}
	}
	return true
}

// Sign is k's signature of text for p; "" (verifying nothing) for an EventV1 text not apart.
func (k Key) Sign(p Purpose, text string) string {
	if !p.apart(text) {
		return ""
	}
	m := hmac.New(sha256.New, k)
	m.Write([]byte(p.prefix + text))
	sum := m.Sum(nil)[:p.bytes]
	if p.hex {
		return hex.EncodeToString(sum)
	}
	return base64.RawURLEncoding.EncodeToString(sum)
}

// Verify reports, in constant time, whether sig is k's signature of text for p. An empty
// key verifies nothing, nor does an EventV1 text that starts with another purpose's prefix.
func (k Key) Verify(p Purpose, text, sig string) bool {
	return k.Set() && p.apart(text) && sig != "" && hmac.Equal([]byte(sig), []byte(k.Sign(p, text)))
}

// MinKeyBytes: HMAC-SHA256 wants a key as long as its output; shorter ones can be searched.
const MinKeyBytes = 32

// PlaceholderKey is the value an earlier manifest shipped: everyone can read it, so it signs nothing.
const PlaceholderKey = "replace-me-with-32-random-bytes"

// Check refuses a key that would let others sign: empty, shorter than MinKeyBytes, or the
// published placeholder. Every function that signs or verifies calls it before it starts.
func (k Key) Check() error {
	switch {
	case len(k) == 0:
		return fmt.Errorf("EVENT_SIGNING_KEY is not set: without it anyone could sign events (make deploy creates the Secret)")
	case string(k) == PlaceholderKey:
		return fmt.Errorf("EVENT_SIGNING_KEY is the published placeholder %q: create a random key (make deploy does)", PlaceholderKey)
	case len(k) < MinKeyBytes:
		return fmt.Errorf("EVENT_SIGNING_KEY has %d bytes, want at least %d (e.g. openssl rand -hex 32)", len(k), MinKeyBytes)
	}
	return nil
}
