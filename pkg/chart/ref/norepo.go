package ref

import (
	"fmt"
	"regexp"

	"k8s.io/apimachinery/pkg/util/validation"
)

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
