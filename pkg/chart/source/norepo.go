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

// cacheKey keys a fetch: the namespace (its project repositories decide what a URL or an
// index entry resolves with), and for a chart outside the repositories, whether it is one
// and the credentials it was fetched with (a chart fetched with one Secret is never served
// for another, and never without reading that Secret for the caller first). The URL's
// fragment is never fetched, so not part of it. It is a digest: a key costs keyBytes
// however long the reference.
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

// fetchNoRepo fetches a chart by URL outside every chart repository, with the basic auth of
// creds (nil: none), through the same address guard and bounds as any download.
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

// urlInstall is what a release of ref records in its chart's annotations, as the console
// writes them for a chart by URL (chartref.URLInstall).
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

// forRequest is c for ref: a copy whose Fresh loads take t's share and write ref's
// annotations into every Fresh chart (the shared, cached chart is left as it is).
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

// ErrAuthSecret is a basic auth Secret (Ref.AuthSecret) that is missing or lacks its keys:
// the request names something that cannot be used (400, as the console answers it).
var ErrAuthSecret = fmt.Errorf("%w: basic auth secret", ErrInvalidRef)

// AuthSecretReader reads the basic auth Secret a reference names (Ref.AuthSecret) for the
// caller in ctx (CallerFrom) only: a caller who may not read it gets an error, and nothing
// is fetched with it. Submit reviews the caller's access and reads with its own rights;
// the executor reads impersonating the caller (package chartrepos).
type AuthSecretReader interface {
	ReadAuthSecret(ctx context.Context, namespace, name string) (Credentials, error)
}

// readAuthSecret reads the reference's basic auth, for the caller in ctx; every request
// for such a chart reads it again (a cache hit too): the read is the access check.
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
