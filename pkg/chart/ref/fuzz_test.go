package ref

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzRef: parsing a chart reference never panics, and an accepted URL has an allowed
// scheme and a host; an accepted index entry splits into a chart and a repository.
func FuzzRef(f *testing.F) {
	for _, s := range []string{"https://charts.example.com/a-1.0.0.tgz", "oci://registry.example.com/charts/a", "file:///etc/passwd",
		"http://169.254.169.254/", "a--b", "--b", "a--", "gopher://x", "http://[::1", "https://user:pw@host/x.tgz"} {
		f.Add(s, "")
		f.Add("", s)
	}
	f.Fuzz(func(t *testing.T, u, entry string) {
		r := Ref{URL: u, IndexEntry: entry}
		if err := r.Validate(); err != nil {
			return
		}
		if u != "" {
			p, err := url.Parse(u)
			if err != nil || p.Host == "" || (p.Scheme != "http" && p.Scheme != "https" && p.Scheme != "oci") {
				t.Fatalf("accepted URL %q", u)
			}
			return
		}
		c, repo, err := SplitIndexEntry(entry)
		if err != nil || c == "" || repo == "" || !strings.Contains(entry, "--") {
			t.Fatalf("accepted index entry %q as %q, %q", entry, c, repo)
		}
	})
}
