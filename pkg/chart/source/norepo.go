package source

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/registry"
	"oras.land/oras-go/v2/registry/remote/auth"

	chartref "github.com/async-helm/async-helm/pkg/chart/ref"
)

// cacheKey keys a fetch: the namespace (its project repositories decide what a reference
// resolves with), the reference without its fragment (never fetched), and the credentials
// fetched with (a chart fetched with one Secret is never served for another). A digest: a
// key costs keyBytes however long the reference.
func cacheKey(ref Ref, creds *Credentials) string {
	u, _, _ := strings.Cut(ref.URL, "#")
	parts := []string{ref.Namespace, u, ref.Version, ref.IndexEntry, strconv.FormatBool(ref.NoRepo)}
	if creds != nil {
		parts = append(parts, "auth", ref.AuthSecret, creds.Username, creds.Password)
	}
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s", len(p), p)
	}
	return string(h.Sum(nil))
}

// keyBytes is what the cache counts for a key: its digest, its entry and its namespace.
const keyBytes = 256

// fetchNoRepo fetches a chart by URL outside every repository, with creds' basic auth (nil:
// none), through the same guard and bounds as any download.
func (s *Source) fetchNoRepo(ctx context.Context, ref Ref, creds *Credentials) ([]byte, error) {
	if isOCI(ref.URL) {
		return s.fetchOCIWith(ctx, ref, creds)
	}
	rc := &repoClient{http: s.client()}
	if creds != nil {
		u, err := url.Parse(ref.URL)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidRef, err)
		}
		// Basic auth goes to the chart URL's own scheme and host only (authorize).
		rc.repo = &Repository{Name: "basic_auth_secret_name " + ref.AuthSecret, URL: u.Scheme + "://" + u.Host, Credentials: *creds}
	}
	return s.fetchWith(ctx, rc, ref.URL, s.maxBytes())
}

// ociAuthorizer sends creds to the registry host of the reference only (a redirect to
// another host that asks for credentials gets none).
func ociAuthorizer(client *http.Client, host string, creds *Credentials) registry.ClientOption {
	return registry.ClientOptAuthorizer(auth.Client{Client: client, Cache: auth.NewCache(),
		Credential: auth.StaticCredential(host, auth.Credential{Username: creds.Username, Password: creds.Password})})
}

// urlInstall is what a release of ref records in its chart's annotations (chartref.URLInstall).
func urlInstall(ref Ref) chartref.URLInstall {
	var u chartref.URLInstall
	if ref.NoRepo || ref.AuthSecret != "" {
		u.ChartURL = ref.URL
	}
	if ref.NoRepo {
		u.Installation = chartref.InstallationURL
	}
	u.AuthSecret = ref.AuthSecret
	return u
}

// forRequest is a copy of c whose Fresh loads take t's share and write ref's annotations.
func forRequest(c *Chart, ref Ref, t Tenant) *Chart {
	if c == nil {
		return c
	}
	cp := *c
	cp.tenant = t
	if u := urlInstall(ref); len(u.Annotations()) > 0 {
		cp.annotate = u.Annotate
	}
	return &cp
}

// annotated applies the chart's annotations, if any, to a chart Fresh made.
func (c *Chart) annotated(ch *chart.Chart, err error) (*chart.Chart, error) {
	if err == nil && c.annotate != nil {
		c.annotate(ch)
	}
	return ch, err
}

// ErrAuthSecret is a basic auth Secret (Ref.AuthSecret) missing or without its keys (400).
var ErrAuthSecret = fmt.Errorf("%w: basic auth secret", ErrInvalidRef)

// AuthSecretReader reads the basic auth Secret a reference names for the caller in ctx
// (CallerFrom) only: one who may not read it gets an error, and nothing is fetched with it.
type AuthSecretReader interface {
	ReadAuthSecret(ctx context.Context, namespace, name string) (Credentials, error)
}

// readAuthSecret reads the reference's basic auth for the caller in ctx, on every request:
// the read is the access check.
func (s *Source) readAuthSecret(ctx context.Context, ref Ref) (*Credentials, error) {
	if ref.AuthSecret == "" {
		return nil, nil
	}
	r := s.AuthSecrets
	if r == nil {
		return nil, fmt.Errorf("%w: no reader of basic auth Secrets is configured; Secret %s/%s not used",
			ErrCredentialsRefused, ref.Namespace, ref.AuthSecret)
	}
	c, err := r.ReadAuthSecret(ctx, ref.Namespace, ref.AuthSecret)
	if err != nil {
		return nil, err
	}
	return &c, nil
}
