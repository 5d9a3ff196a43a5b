package source

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A URL's userinfo never appears in an error of chartsource, whichever path fails: index
// fetches (what console-warning shows) as well as chart downloads.
func TestNoErrorShowsAURLsCredentials(t *testing.T) {
	tiny := tgz(t, chartYAML("tiny"))
	var base string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/denied/index.yaml":
			http.Error(w, "no", http.StatusUnauthorized)
		case "/broken/index.yaml":
			_, _ = w.Write([]byte("entries: [this is not an index"))
		case "/good/index.yaml":
			_, _ = w.Write([]byte("apiVersion: v1\nentries:\n  tiny:\n  - name: tiny\n    version: 0.1.0\n    urls: [" +
				strings.Replace(base, "://", "://alice:s3cr3t-pw@", 1) + "/gone/tiny-0.1.0.tgz]\n"))
		case "/charts/tiny.tgz":
			_, _ = w.Write(tiny)
		case "/charts/garbage.tgz":
			_, _ = w.Write([]byte("not a chart"))
		case "/charts/bomb.tgz":
			_, _ = w.Write(bomb(t, 2, 4<<20))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	base = srv.URL
	creds := func(u string) string { return strings.Replace(u, "://", "://alice:s3cr3t-pw@", 1) }
	client := Policy{AllowLoopback: true}.HTTPClient(10 * time.Second)
	src := &Source{HTTP: client, Budget: Budget{MaxBytes: 6 << 20}, Repositories: map[string]string{"good": creds(base + "/good")}}
	guarded := &Source{HTTP: Policy{}.HTTPClient(10 * time.Second)}

	var errs []error
	for _, u := range []string{creds(base + "/missing"), creds(base + "/denied"), creds(base + "/broken"),
		"http://alice:s3cr3t-pw@127.0.0.1:1/refused", "http://alice:s3cr3t pw@" + strings.TrimPrefix(base, "http://") + "/unparsable"} {
		_, err := src.FetchIndex(context.Background(), Repository{Name: "r", URL: u})
		errs = append(errs, err)
	}
	_, err := guarded.FetchIndex(context.Background(), Repository{Name: "r", URL: "http://alice:s3cr3t-pw@169.254.169.254/"})
	errs = append(errs, err)
	for _, ref := range []Ref{
		{URL: creds(base + "/charts/garbage.tgz")},
		{URL: creds(base + "/charts/bomb.tgz")},
		{URL: creds(base + "/charts/tiny.tgz"), Version: "9.9.9"},
		{IndexEntry: "tiny--good", Version: "0.1.0"},
		{IndexEntry: "tiny--good", URL: creds(base + "/missing/tiny.tgz")},
	} {
		_, err := src.Get(context.Background(), ref)
		errs = append(errs, err)
	}
	for _, err := range errs {
		if err == nil {
			t.Error("a failing fetch succeeded")
			continue
		}
		t.Log(err)
		if msg := err.Error(); strings.Contains(msg, "s3cr3t") || strings.Contains(msg, "alice") {
			t.Errorf("the error shows the URL's credentials: %s", msg)
		}
	}
}

// Credentials in a chart URL never appear in the error, whichever way the fetch fails.
func TestCredentialsInChartURLsAreRedacted(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	src := &Source{HTTP: Policy{AllowLoopback: true}.HTTPClient(10 * time.Second), PlainHTTPRegistries: []string{host}}
	guarded := &Source{HTTP: Policy{}.HTTPClient(10 * time.Second)}
	for _, c := range []struct {
		src  *Source
		url  string
		want error
	}{
		{src, "http://alice:s3cr3t-pw@" + host + "/missing.tgz", ErrNotFound},
		{src, "https://alice:s3cr3t-pw@" + host + "/tls-to-plain.tgz", ErrUnreachable},
		{src, "http://alice:s3cr3t-pw@127.0.0.1:1/refused.tgz", ErrUnreachable},
		{guarded, "http://alice:s3cr3t-pw@169.254.169.254/latest/meta-data", ErrForbiddenHost},
		{src, "oci://alice:s3cr3t-pw@" + host + "/charts/missing:1.0.0", nil},
		{src, "http://alice:s3cr3t pw@" + host + "/unparsable.tgz", ErrInvalidRef},
	} {
		_, err := c.src.Get(context.Background(), Ref{URL: c.url})
		if err == nil || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%s: %v, want %v", c.url, err, c.want)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, "s3cr3t") || strings.Contains(msg, "alice") {
			t.Errorf("the error shows the URL's credentials: %s", msg)
		}
	}
}
