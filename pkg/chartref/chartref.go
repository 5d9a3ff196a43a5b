// Package chartref is how a request names a chart: an archive URL (http, https, oci) or the
// console's index entry "<chart>--<repository>". It only parses; package chartsource fetches.
package chartref

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// ErrInvalid is a reference that cannot name a chart.
var ErrInvalid = errors.New("invalid chart reference")

// Ref names a chart the way the console does.
type Ref struct {
	URL        string `json:"url,omitempty"`
	Version    string `json:"version,omitempty"`
	IndexEntry string `json:"indexEntry,omitempty"`
}

func (r Ref) String() string {
	if r.IndexEntry != "" {
		return r.IndexEntry + "@" + r.Version
	}
	return r.URL
}

// Validate checks the syntax of a reference.
func (r Ref) Validate() error {
	if r.URL != "" {
		u, err := url.Parse(r.URL)
		if err != nil {
			return fmt.Errorf("%w: %q: %v", ErrInvalid, r.URL, err)
		}
		switch u.Scheme {
		case "http", "https", "oci":
		default:
			return fmt.Errorf("%w: %q: scheme must be http, https or oci", ErrInvalid, r.URL)
		}
		if u.Host == "" {
			return fmt.Errorf("%w: %q: no host", ErrInvalid, r.URL)
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
