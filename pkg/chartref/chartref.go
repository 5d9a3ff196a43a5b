// Package chartref is how a request names a chart: an archive URL (http, https, oci) or the
// console's index entry "<chart>--<repository>". It only parses; package chartsource fetches.
package chartref

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// ErrInvalid is a reference that cannot name a chart.
var ErrInvalid = errors.New("invalid chart reference")

// Ref names a chart the way the console does.
type Ref struct {
	URL        string `json:"url,omitempty"`
	Version    string `json:"version,omitempty"`
	IndexEntry string `json:"indexEntry,omitempty"`
	// Namespace is where the chart is used: its project chart repositories (and their
	// credentials) are the ones an index entry or a URL under them resolves with.
	Namespace string `json:"namespace,omitempty"`
}

// String names the chart for messages and logs, with any credentials of its URL redacted.
func (r Ref) String() string {
	if r.IndexEntry != "" {
		return r.IndexEntry + "@" + r.Version
	}
	return RedactURL(r.URL)
}

// RedactURL is one URL without the credentials of its authority, also when the URL does not
// parse (a space or a stray "%" in a password).
func RedactURL(u string) string {
	i := strings.Index(u, "://")
	if i < 0 {
		return Redact(u)
	}
	rest := u[i+3:]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	at := strings.LastIndex(rest[:end], "@")
	if at < 0 {
		return u
	}
	return u[:i+3] + Redacted + rest[at:]
}

// userinfo is the "user:password@" of every URL in a text: from the scheme up to the last
// "@" before the path (a password may hold a raw "@").
var userinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^/?#\s"'<>]*@`)

// Redacted stands where credentials were.
const Redacted = "REDACTED"

// Redact removes the credentials (user and password) of every URL in s: a chart URL may
// carry them (https://user:pass@host/...), and errors, failure reasons, events and logs
// print URLs.
func Redact(s string) string {
	if !strings.Contains(s, "@") {
		return s
	}
	return userinfo.ReplaceAllString(s, "${1}"+Redacted+"@")
}

// RedactError is err with the credentials of the URLs in its message redacted; errors.Is
// and errors.As still see err.
func RedactError(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if red := Redact(msg); red != msg {
		return &redactedError{msg: red, err: err}
	}
	return err
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// Validate checks the syntax of a reference.
func (r Ref) Validate() error {
	if r.URL != "" {
		u, err := url.Parse(r.URL)
		if err != nil {
			// url.Parse's error quotes the URL, credentials included: not shown.
			return fmt.Errorf("%w: %q is not a valid URL", ErrInvalid, RedactURL(r.URL))
		}
		switch u.Scheme {
		case "http", "https", "oci":
		default:
			return fmt.Errorf("%w: %q: scheme must be http, https or oci", ErrInvalid, RedactURL(r.URL))
		}
		if u.Host == "" {
			return fmt.Errorf("%w: %q: no host", ErrInvalid, RedactURL(r.URL))
		}
		return nil
	}
	if _, _, err := SplitIndexEntry(r.IndexEntry); err != nil {
		return err
	}
	return nil
}

// SplitIndexEntry reads the console's "<chart>--<repository>" form.
func SplitIndexEntry(e string) (chartName, repoName string, err error) {
	i := strings.LastIndex(e, "--")
	if i <= 0 || i+2 >= len(e) {
		return "", "", fmt.Errorf("%w: index entry %q: want <chart>--<repository>", ErrInvalid, e)
	}
	return e[:i], e[i+2:], nil
}
