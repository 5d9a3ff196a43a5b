package source

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	chartref "github.com/async-helm/async-helm/pkg/chart/ref"
)

// fakeAuthSecrets reads basic auth Secrets for the callers it allows.
type fakeAuthSecrets struct {
	creds   map[string]Credentials // namespace/name
	allowed map[string]bool        // caller names
	reads   atomic.Int64
}

func (f *fakeAuthSecrets) ReadAuthSecret(ctx context.Context, namespace, name string) (Credentials, error) {
	f.reads.Add(1)
	c, ok := CallerFrom(ctx)
	if !ok || !f.allowed[c.User] {
		return Credentials{}, fmt.Errorf("%w: %q may not get Secret %s/%s", ErrCredentialsRefused, c.User, namespace, name)
	}
	cr, ok := f.creds[namespace+"/"+name]
	if !ok {
		return Credentials{}, fmt.Errorf("%w: Secret %s/%s not found", ErrAuthSecret, namespace, name)
	}
	return cr, nil
}

// basicAuthServer serves archive to requests with user:pass only; it counts what it saw.
func basicAuthServer(t *testing.T, archive []byte, user, pass string) (*httptest.Server, *atomic.Int64, *atomic.Int64) {
	t.Helper()
	var served, refused atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != pass {
			refused.Add(1)
			w.Header().Set("WWW-Authenticate", `Basic realm="charts"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		served.Add(1)
		_, _ = w.Write(archive)
	}))
	t.Cleanup(srv.Close)
	return srv, &served, &refused
}

func as(user string) context.Context {
	return WithCaller(context.Background(), Caller{User: user})
}

// A chart outside the repositories is fetched with the basic auth of the Secret the
// request names, read for the caller on every request (a cache hit too): a caller who
// may not read it gets nothing, and the server sees nothing.
func TestNoRepoChartWithTheCallersBasicAuthSecret(t *testing.T) {
	srv, served, refused := basicAuthServer(t, tgz(t, chartYAML("tiny")), "chartuser", "s3cret")
	secrets := &fakeAuthSecrets{creds: map[string]Credentials{"team-a/chart-auth": {Username: "chartuser", Password: "s3cret"}},
		allowed: map[string]bool{"alice": true}}
	src := &Source{HTTP: Policy{AllowLoopback: true}.HTTPClient(10 * time.Second), AuthSecrets: secrets, TTL: time.Hour}
	ref := Ref{URL: srv.URL + "/tiny-0.1.0.tgz", NoRepo: true, AuthSecret: "chart-auth", Namespace: "team-a"}

	c, err := src.Get(as("alice"), ref)
	if err != nil || served.Load() != 1 {
		t.Fatalf("alice: %v (served %d)", err, served.Load())
	}
	// The shared chart is left as it is; each Fresh copy carries the console's annotations.
	if len(c.Loaded.Metadata.Annotations) != 0 {
		t.Errorf("the cached chart was annotated: %v", c.Loaded.Metadata.Annotations)
	}
	fresh, err := c.Fresh(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{chartref.AnnotationChartURL: ref.URL, chartref.AnnotationInstallation: chartref.InstallationURL,
		chartref.AnnotationAuthSecret: "chart-auth"}
	for k, v := range want {
		if fresh.Metadata.Annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, fresh.Metadata.Annotations[k], v)
		}
	}
	// mallory may not read the Secret: refused before the cache, nothing sent.
	if _, err := src.Get(as("mallory"), ref); !errors.Is(err, ErrCredentialsRefused) {
		t.Errorf("mallory: %v, want ErrCredentialsRefused", err)
	}
	if _, ok := CallerFrom(context.Background()); ok {
		t.Fatal("a caller without WithCaller")
	}
	if _, err := src.Get(context.Background(), ref); !errors.Is(err, ErrCredentialsRefused) {
		t.Errorf("no caller: %v, want ErrCredentialsRefused", err)
	}
	// alice again: the Secret is read again, the chart comes from the cache.
	if _, err := src.Get(as("alice"), ref); err != nil || served.Load() != 1 || secrets.reads.Load() != 4 {
		t.Errorf("alice again: %v, served %d, Secret reads %d (want 1 and 4)", err, served.Load(), secrets.reads.Load())
	}
	// New credentials are a new fetch (the key holds their digest).
	secrets.creds["team-a/chart-auth"] = Credentials{Username: "chartuser", Password: "rotated"}
	if _, err := src.Get(as("alice"), ref); !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "401") {
		t.Errorf("rotated credentials: %v, want the server's 401", err)
	}
	if refused.Load() != 1 {
		t.Errorf("the server refused %d requests, want 1 (the rotated credentials)", refused.Load())
	}
	// Without a Secret: the server's 401.
	if _, err := src.Get(as("alice"), Ref{URL: ref.URL, NoRepo: true}); !errors.Is(err, ErrUnreachable) {
		t.Errorf("no Secret: %v, want ErrUnreachable", err)
	}
	// A missing Secret is the request's fault (400).
	if _, err := src.Get(as("alice"), Ref{URL: ref.URL, NoRepo: true, AuthSecret: "nope", Namespace: "team-a"}); !errors.Is(err, ErrAuthSecret) || !errors.Is(err, ErrInvalidRef) {
		t.Errorf("missing Secret: %v, want ErrAuthSecret", err)
	}
	// No reader configured: refused.
	bare := &Source{HTTP: Policy{AllowLoopback: true}.HTTPClient(10 * time.Second)}
	if _, err := bare.Get(as("alice"), ref); !errors.Is(err, ErrCredentialsRefused) {
		t.Errorf("no reader: %v, want ErrCredentialsRefused", err)
	}
}

// The bounds of every download hold for a chart outside the repositories: the address
// guard, the size bound, the unpack budget; basic auth goes to the chart URL's host only.
func TestNoRepoChartKeepsTheBounds(t *testing.T) {
	other := 0
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			other++
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(elsewhere.Close)
	redirect := httptest.NewServer(http.RedirectHandler(strings.Replace(elsewhere.URL, "127.0.0.1", "localhost", 1)+"/x.tgz", http.StatusFound))
	t.Cleanup(redirect.Close)
	big, _, _ := basicAuthServer(t, make([]byte, 2<<20), "u", "p")
	bombSrv, _, _ := basicAuthServer(t, bomb(t, 2, 4<<20), "u", "p")
	secrets := &fakeAuthSecrets{creds: map[string]Credentials{"a/s": {Username: "u", Password: "p"}}, allowed: map[string]bool{"alice": true}}
	src := &Source{HTTP: Policy{AllowLoopback: true}.HTTPClient(10 * time.Second), AuthSecrets: secrets, MaxBytes: 1 << 20,
		Budget: Budget{MaxBytes: 6 << 20}}
	ref := func(u string) Ref { return Ref{URL: u, NoRepo: true, AuthSecret: "s", Namespace: "a"} }
	if _, err := src.Get(as("alice"), ref(big.URL+"/big-1.0.0.tgz")); !errors.Is(err, ErrTooLarge) {
		t.Errorf("2 MiB archive: %v, want ErrTooLarge", err)
	}
	if _, err := src.Get(as("alice"), ref(bombSrv.URL+"/bomb-1.0.0.tgz")); !errors.Is(err, ErrTooLarge) {
		t.Errorf("bomb: %v, want ErrTooLarge", err)
	}
	if _, err := src.Get(as("alice"), ref(redirect.URL+"/r-1.0.0.tgz")); err == nil || other != 0 {
		t.Errorf("redirect elsewhere: %v; basic auth sent %d times to the other host", err, other)
	}
	guarded := &Source{HTTP: Policy{}.HTTPClient(10 * time.Second), AuthSecrets: secrets}
	if _, err := guarded.Get(as("alice"), ref(big.URL+"/big-1.0.0.tgz")); !errors.Is(err, ErrForbiddenHost) {
		t.Errorf("loopback without permission: %v, want ErrForbiddenHost", err)
	}
}

// An oci:// chart outside the repositories is pulled with the Secret's basic auth (the
// registry asks for it with a Basic challenge).
func TestNoRepoOCIChartWithBasicAuth(t *testing.T) {
	addr := startRegistry(t)
	push(t, tgz(t, chartYAML("tiny")), addr+"/charts/tiny:0.1.0")
	target, err := url.Parse("http://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	var refused atomic.Int64
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "robot" || p != "token" {
			refused.Add(1)
			w.Header().Set("WWW-Authenticate", `Basic realm="registry"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	host := strings.TrimPrefix(front.URL, "http://")
	secrets := &fakeAuthSecrets{creds: map[string]Credentials{"a/robot": {Username: "robot", Password: "token"}}, allowed: map[string]bool{"alice": true}}
	src := &Source{HTTP: Policy{AllowLoopback: true}.HTTPClient(10 * time.Second), AuthSecrets: secrets, PlainHTTPRegistries: []string{host}}
	c, err := src.Get(as("alice"), Ref{URL: "oci://" + host + "/charts/tiny:0.1.0", NoRepo: true, AuthSecret: "robot", Namespace: "a"})
	if err != nil || c.Loaded.Metadata.Name != "tiny" || refused.Load() == 0 {
		t.Fatalf("oci with basic auth: %v (challenges %d)", err, refused.Load())
	}
	if _, err := src.Get(as("alice"), Ref{URL: "oci://" + host + "/charts/tiny:0.1.0", NoRepo: true}); err == nil {
		t.Error("oci without the Secret was pulled")
	}
}
