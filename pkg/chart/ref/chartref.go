// Package ref is how a request names a chart: an archive URL (http, https, oci) or the
// console's index entry "<chart>--<repository>". It only parses; package chartsource fetches.
package ref

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ErrInvalid is a reference that cannot name a chart.
var ErrInvalid = errors.New("invalid chart reference")

// Ref names a chart the way the console does.
type Ref struct {
	URL        string `json:"url,omitempty"`
	Version    string `json:"version,omitempty"`
	IndexEntry string `json:"indexEntry,omitempty"`
	// Namespace is where the chart is used: its project repositories resolve the reference.
	Namespace string `json:"namespace,omitempty"`
	// NoRepo is the console's noRepo: URL is fetched outside every repository (without
	// their credentials), and recorded as the console does (installation: url_install).
	NoRepo bool `json:"noRepo,omitempty"`
	// AuthSecret names a Secret of Namespace (keys username, password) for the fetch's basic
	// auth (the console's basic_auth_secret_name), read for the caller only.
	AuthSecret string `json:"authSecret,omitempty"`
}

// String names the chart for messages and logs, with any credentials of its URL redacted.
func (r Ref) String() string {
	if r.IndexEntry != "" {
		return r.IndexEntry + "@" + r.Version
	}
	return Redact(r.URL)
}

// Redacted stands where credentials were.
const Redacted = "REDACTED"

// Redact removes the credentials of every URL in s, a URL or any text holding URLs
// (https://user:pass@host/...): everything from "://" to the last "@" before the authority
// ends ("/", "?", "#", a quote, "<", ">" or a line break), since a password may hold "@" or
// a space. In plain text that may redact more than the userinfo, never less.
func Redact(s string) string {
	if !strings.Contains(s, "@") || !strings.Contains(s, "://") {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "://")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i+3])
		s = s[i+3:]
		end := strings.IndexAny(s, "/?#\"'<>\n\r")
		if end < 0 {
			end = len(s)
		}
		if at := strings.LastIndex(s[:end], "@"); at >= 0 {
			b.WriteString(Redacted)
			s = s[at:]
		}
	}
}

// RedactError redacts err's message; errors.Is and errors.As still see err.
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
	if r.NoRepo || r.AuthSecret != "" {
		return r.validateNoRepo()
	}
	if r.URL != "" {
		u, err := url.Parse(r.URL)
		if err != nil {
			// url.Parse's error quotes the URL, credentials included: not shown.
			return fmt.Errorf("%w: %q is not a valid URL", ErrInvalid, Redact(r.URL))
		}
		switch u.Scheme {
		case "http", "https", "oci":
		default:
			return fmt.Errorf("%w: %q: scheme must be http, https or oci", ErrInvalid, Redact(r.URL))
		}
		if u.Host == "" {
			return fmt.Errorf("%w: %q: no host", ErrInvalid, Redact(r.URL))
		}
		return nil
	}
	if _, _, err := SplitIndexEntry(r.IndexEntry); err != nil {
		return err
	}
	return nil
}

// IndexEntry is the console's name of a chart in a repository, "<chart>--<repository>".
func IndexEntry(chartName, repoName string) string { return chartName + "--" + repoName }

// SplitIndexEntry reads the console's "<chart>--<repository>" form.
func SplitIndexEntry(e string) (chartName, repoName string, err error) {
	i := strings.LastIndex(e, "--")
	if i <= 0 || i+2 >= len(e) {
		return "", "", fmt.Errorf("%w: index entry %q: want <chart>--<repository>", ErrInvalid, e)
	}
	return e[:i], e[i+2:], nil
}

// validateNoRepo checks a chart outside any repository or with a basic auth Secret: an
// archive URL only (the console's rule), the Secret's name and its namespace.
func (r Ref) validateNoRepo() error {
	if r.IndexEntry != "" {
		return fmt.Errorf("%w: noRepo and basic_auth_secret_name name a chart by chart_url, not by indexEntry", ErrInvalid)
	}
	if err := CheckArchiveURL(r.URL); err != nil {
		return err
	}
	if err := CheckAuthSecret(r.AuthSecret, false); err != nil {
		return err
	}
	if r.AuthSecret != "" && r.Namespace == "" {
		return fmt.Errorf("%w: basic_auth_secret_name %q needs the namespace it is read from", ErrInvalid, r.AuthSecret)
	}
	return nil
}

// The console's rule for a chart URL outside any repository (IsValidChartURL): oci://<host>
// or http(s)://<host>[:port]/<path>.tgz|.tar.gz, host labels as RFC 1123 has them.
var (
	dnsLabel  = `[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?`
	hostPort  = dnsLabel + `(?:\.` + dnsLabel + `)*\.?(?::\d+)?`
	ociURLRe  = regexp.MustCompile(`(?i)^oci://` + hostPort)
	httpURLRe = regexp.MustCompile(`(?i)^https?://` + hostPort + `/.+\.(?:tar\.gz|tgz)$`)
)

// IsChartArchiveURL is the console's IsValidChartURL.
func IsChartArchiveURL(raw string) bool {
	return ociURLRe.MatchString(raw) || httpURLRe.MatchString(raw)
}

// CheckArchiveURL refuses, as the console does, a URL that is not IsChartArchiveURL.
func CheckArchiveURL(raw string) error {
	if !IsChartArchiveURL(raw) {
		return fmt.Errorf("%w: invalid chart URL %q: must be oci:// or http(s)://*.tgz", ErrInvalid, Redact(raw))
	}
	return nil
}

// NoneSecret is the console's basic_auth_secret_name that clears the recorded Secret.
const NoneSecret = "__none__"

// CheckAuthSecret checks a basic auth Secret's name (or NoneSecret when noneAllowed).
func CheckAuthSecret(name string, noneAllowed bool) error {
	if name == "" || (noneAllowed && name == NoneSecret) {
		return nil
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("%w: basic_auth_secret_name %q: %s", ErrInvalid, name, errs[0])
	}
	return nil
}

// The chart annotations the console writes into a release's chart installed by URL outside
// any repository (openshift/console pkg/helm/actions): an upgrade finds its Secret there.
const (
	AnnotationChartURL     = "chart_url"
	AnnotationInstallation = "installation"
	InstallationURL        = "url_install"
	AnnotationAuthSecret   = "helm.openshift.io/auth-secret"
)

// URLInstall is what a chart by URL records in its chart's annotations.
type URLInstall struct {
	ChartURL, Installation, AuthSecret string
}

// Annotations are the annotations u writes (none when it is empty).
func (u URLInstall) Annotations() map[string]string {
	out := map[string]string{}
	for k, v := range map[string]string{AnnotationChartURL: u.ChartURL, AnnotationInstallation: u.Installation, AnnotationAuthSecret: u.AuthSecret} {
		if v != "" {
			out[k] = v
		}
	}
	return out
}

// Annotate writes u's annotations into a chart the caller owns (not a shared one).
func (u URLInstall) Annotate(ch *chart.Chart) {
	ann := u.Annotations()
	if ch == nil || len(ann) == 0 {
		return
	}
	if ch.Metadata == nil {
		ch.Metadata = &chart.Metadata{}
	}
	if ch.Metadata.Annotations == nil {
		ch.Metadata.Annotations = map[string]string{}
	}
	for k, v := range ann {
		ch.Metadata.Annotations[k] = v
	}
}

// RecordedURLInstall is what a stored release's chart recorded.
func RecordedURLInstall(ch *chart.Chart) URLInstall {
	if ch == nil || ch.Metadata == nil {
		return URLInstall{}
	}
	a := ch.Metadata.Annotations
	return URLInstall{ChartURL: a[AnnotationChartURL], Installation: a[AnnotationInstallation], AuthSecret: a[AnnotationAuthSecret]}
}
