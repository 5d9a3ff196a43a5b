package signing

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"
)

// oldMAC is the HMAC the signers before this package wrote, each with its own code.
func oldMAC(key []byte, text string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(text))
	return m.Sum(nil)
}

// What was signed before keeps verifying: each purpose writes what its old signer wrote.
// (Event and Cancel changed on purpose: TestPurposesAreApart, lease.TestACancelIsBoundToItsRequest.)
func TestSignaturesAsTheyWereWritten(t *testing.T) {
	key := Key(strings.Repeat("k", 32))
	b64 := base64.RawURLEncoding.EncodeToString
	for _, c := range []struct {
		name string
		p    Purpose
		text string
		old  string
	}{
		{"event v1", EventV1, "id\ntype", b64(oldMAC(key, "id\ntype"))},
		{"binding", Binding, "req\ntype\nns/web\n1\nuid", b64(oldMAC(key, "binding\nreq\ntype\nns/web\n1\nuid"))},
		{"record seal", Record, "team/sh.helm.release.v1.web.v1/req", hex.EncodeToString(oldMAC(key, "async-helm seal\nteam/sh.helm.release.v1.web.v1/req"))[:40]},
	} {
		if got := key.Sign(c.p, c.text); got != c.old {
			t.Errorf("%s: signs %q, the old signer wrote %q", c.name, got, c.old)
		}
		if !key.Verify(c.p, c.text, c.old) {
			t.Errorf("%s: the old signature does not verify", c.name)
		}
	}
}

// A signature verifies only for its own purpose, text and key.
func TestVerifyRefuses(t *testing.T) {
	key := Key(strings.Repeat("k", 32))
	sig := key.Sign(Event, "x")
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"another purpose", key.Verify(Binding, "x", sig)},
		{"another text", key.Verify(Event, "y", sig)},
		{"another key", Key(strings.Repeat("o", 32)).Verify(Event, "x", sig)},
		{"no key", Key(nil).Verify(Event, "x", Key(nil).Sign(Event, "x"))},
		{"empty signature", key.Verify(Event, "x", "")},
		{"truncated", key.Verify(Event, "x", sig[:len(sig)-1])},
	} {
		if c.ok {
			t.Errorf("%s: verified", c.name)
		}
	}
	if !key.Verify(Event, "x", sig) {
		t.Error("its own signature does not verify")
	}
}

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		key  string
		want string // "" = accepted
	}{
		{"", "not set"},
		{"e2e-signing-key", "at least 32"},
		{strings.Repeat("k", 31), "at least 32"},
		{PlaceholderKey, "placeholder"},
		{strings.Repeat("k", 32), ""},
		{"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", ""},
	} {
		err := Key(c.key).Check()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("key %q refused: %v", c.key, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("key %q: %v, want an error with %q", c.key, err, c.want)
		}
	}
}

// No signature made for one purpose verifies as another's: each prefix is apart from every
// other (none starts another), and an EventV1 text, which has no prefix, is refused when it
// starts with another purpose's, so that, for instance, a binding's signature of x does not
// verify as an event's of "binding\n"+x (it did while Event had no prefix).
func TestPurposesAreApart(t *testing.T) {
	named := map[string]Purpose{"event": Event, "binding": Binding, "record": Record, "cancel": Cancel, "deployer": Deployer, "identity": Identity, "notified": Notified}
	for a, p := range named {
		if p.prefix == "" {
			t.Errorf("%s has no prefix", a)
		}
		for b, q := range named {
			if a != b && strings.HasPrefix(p.prefix, q.prefix) {
				t.Errorf("the prefix of %s (%q) starts with that of %s (%q)", a, p.prefix, b, q.prefix)
			}
		}
	}
	key := Key(strings.Repeat("k", 32))
	const x = "req\ntype\nns/web\n1\nuid"
	for name, p := range named {
		other := key.Sign(p, x)
		for _, as := range []Purpose{Event, EventV1} {
			if key.Verify(as, p.prefix+x, other) {
				t.Errorf("a %s signature of x verifies as an event's of %q", name, p.prefix+x)
			}
		}
	}
	if got := key.Sign(EventV1, Binding.prefix+x); got != "" {
		t.Errorf("signs a v1 event text that is a binding's: %q", got)
	}
	if !key.Verify(EventV1, "req-1\n"+x, key.Sign(EventV1, "req-1\n"+x)) {
		t.Error("a v1 event text that starts with a request id does not verify")
	}
}
