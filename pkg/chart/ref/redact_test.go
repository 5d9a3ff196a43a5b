package ref

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestCredentialsInURLsAreRedacted(t *testing.T) {
	for in, want := range map[string]string{
		"https://alice:pw@charts.example.com/a-1.0.0.tgz":    "https://REDACTED@charts.example.com/a-1.0.0.tgz",
		"https://token@charts.example.com/a.tgz":             "https://REDACTED@charts.example.com/a.tgz",
		"oci://alice:pw@registry.example.com/charts/a:1.0.0": "oci://REDACTED@registry.example.com/charts/a:1.0.0",
		"https://alice:p@ss@charts.example.com/a.tgz":        "https://REDACTED@charts.example.com/a.tgz",
		"https://charts.example.com/a.tgz?mail=a@b":          "https://charts.example.com/a.tgz?mail=a@b",
		`Get "https://alice:***@h/x.tgz": dial tcp: refused`: `Get "https://REDACTED@h/x.tgz": dial tcp: refused`,
		"from http://a:b@h1/x to https://c:d@h2/y":           "from http://REDACTED@h1/x to https://REDACTED@h2/y",
		"plain text without URLs, user@example.com":          "plain text without URLs, user@example.com",
		// url.Parse's error quotes a URL that does not parse, spaces and all.
		`parse "https://alice:my secret@h/index.yaml": invalid character " " in host name`: `parse "https://REDACTED@h/index.yaml": invalid character " " in host name`,
		"https://alice:my secret@h":                    "https://REDACTED@h",
		"chart repository \"r\": oci://u:p w@h:5000/x": "chart repository \"r\": oci://REDACTED@h:5000/x",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
	// A URL that does not parse still loses its credentials, spaces and all.
	if got := Redact("https://alice:my secret@charts.example.com/a.tgz"); got != "https://REDACTED@charts.example.com/a.tgz" {
		t.Errorf("Redact of an unparsable URL: %q", got)
	}
	for _, r := range []Ref{
		{URL: "https://alice:s3cret@charts.example.com/a.tgz"},
		{URL: "https://alice:s3cret@"},              // no host
		{URL: "ftp://alice:s3cret@example.com/a"},   // scheme
		{URL: "https://alice:s3 cret@example.com/"}, // does not parse
		{URL: "https://alice:s3cret%zz@example.com/"},
	} {
		msg := r.String()
		if err := r.Validate(); err != nil {
			msg += " " + err.Error()
		}
		if strings.Contains(msg, "s3") || strings.Contains(msg, "alice") {
			t.Errorf("%q shows its credentials: %s", "…"+r.URL[strings.Index(r.URL, "@"):], msg)
		}
	}
	base := errors.New("sentinel")
	err := RedactError(fmt.Errorf("%w: https://alice:pw@h/x", base))
	if !errors.Is(err, base) || strings.Contains(err.Error(), "pw") {
		t.Errorf("RedactError: %v (errors.Is %v)", err, errors.Is(err, base))
	}
}
