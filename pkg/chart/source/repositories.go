package source

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"golang.org/x/sync/semaphore"
	"helm.sh/helm/v3/pkg/repo"
	"sigs.k8s.io/yaml"

	"github.com/async-helm/async-helm/pkg/chart/bounds"
	chartref "github.com/async-helm/async-helm/pkg/chart/ref"
	"github.com/async-helm/async-helm/pkg/chart/yamlsize"
)

// Repository is one chart repository a namespace sees: its name (the "<repo>" of an index
// entry "<chart>--<repo>"), URL and credentials. Err is set when its configuration cannot
// be used (a CA ConfigMap missing, a certificate that does not parse): every use of the
// repository then fails with it, instead of trying without the credentials.
type Repository struct {
	Name string
	URL  string
	Credentials
	Err error

	// namespace is the one the repository was resolved for (reposFor): a CredentialChecker
	// needs it to find the project repository the credentials came from.
	namespace string
}

// Credentials of one chart repository: basic auth, the CA its server certificate is
// checked with (PEM; the system roots when empty), and a TLS client certificate (PEM).
type Credentials struct {
	Username, Password string
	CA                 []byte
	CertPEM, KeyPEM    []byte
}

// CredentialChecker, when set as Source.Checker, is asked before every request that
// carries a repository's credentials (basic auth, TLS client certificate): a project
// repository's Secrets are the tenant's, and a repository created while a request waits
// must not make the fetcher send Secrets its caller may not read (docs/design.md). A
// refusal fails the fetch before anything reaches the server.
type CredentialChecker interface {
	CheckCredentials(ctx context.Context, namespace string, r Repository) error
}

// Repositories are the chart repositories each namespace sees (package chartrepos merges
// the cluster's HelmChartRepository and ProjectHelmChartRepository objects with
// CHART_REPOSITORIES).
type Repositories interface {
	// Repositories lists what namespace sees, one per name (a project repository hides a
	// cluster one of the same name, as in the console).
	Repositories(ctx context.Context, namespace string) []Repository
}

// staticRepositories are CHART_REPOSITORIES and CHART_REPOSITORY_SECRETS alone.
type staticRepositories struct {
	urls  map[string]string
	creds map[string]Credentials
}

func (s staticRepositories) Repositories(context.Context, string) []Repository {
	out := make([]Repository, 0, len(s.urls))
	for name, u := range s.urls {
		out = append(out, Repository{Name: name, URL: u, Credentials: s.creds[name]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (s *Source) repositories() Repositories {
	if s.Repos != nil {
		return s.Repos
	}
	return staticRepositories{urls: s.Repositories, creds: s.Credentials}
}

// reposFor is what namespace sees. A chart named without a namespace has no access review
// behind it (any valid token may ask): its repositories come without credentials (basic
// auth, client certificate); the CA still checks the server.
func (s *Source) reposFor(ctx context.Context, namespace string) []Repository {
	repos := s.repositories().Repositories(ctx, namespace)
	out := make([]Repository, len(repos))
	for i, r := range repos {
		if namespace == "" {
			r.Username, r.Password, r.CertPEM, r.KeyPEM = "", "", nil, nil
		}
		r.namespace = namespace
		out[i] = r
	}
	return out
}

// Lookup finds the repository an index entry of namespace names.
func (s *Source) Lookup(ctx context.Context, namespace, name string) (Repository, error) {
	for _, r := range s.reposFor(ctx, namespace) {
		if r.Name == name {
			return r, r.Err
		}
	}
	return Repository{}, fmt.Errorf("%w: no chart repository %q is configured", ErrNotFound, name)
}

// forURL finds the repository a chart URL belongs to (by URL prefix) among those namespace
// sees, and the client to fetch it with; other URLs use the default client.
func (s *Source) forURL(ctx context.Context, namespace, u string) (*repoClient, error) {
	var best *Repository
	for _, r := range s.reposFor(ctx, namespace) {
		if strings.HasPrefix(u, strings.TrimSuffix(r.URL, "/")+"/") && (best == nil || len(r.URL) > len(best.URL)) {
			r := r
			best = &r
		}
	}
	if best == nil {
		return &repoClient{http: s.client()}, nil
	}
	return s.clientFor(*best)
}

// repoClient is what fetching from one repository uses: its client (CA, client
// certificate) and the basic auth sent to the repository's own host.
type repoClient struct {
	http *http.Client
	repo *Repository
}

// authorize adds the repository's basic auth to a request for its own scheme and host only:
// a chart URL of its index may point elsewhere (as Helm's PassCredentialsAll=false).
func (rc *repoClient) authorize(req *http.Request) {
	if rc.repo == nil || rc.repo.Username == "" {
		return
	}
	base, err := url.Parse(rc.repo.URL)
	if err == nil && base.Scheme == req.URL.Scheme && base.Host == req.URL.Host {
		req.SetBasicAuth(rc.repo.Username, rc.repo.Password)
	}
}

// clientFor is the guarded client with the repository's TLS settings; when Repos check
// credentials, every request of a repository with some goes through the check first.
func (s *Source) clientFor(r Repository) (*repoClient, error) {
	rc, err := s.tlsClientFor(r)
	if err != nil {
		return nil, err
	}
	cc := s.Checker
	if cc == nil || (r.Username == "" && len(r.CertPEM) == 0) {
		return rc, nil
	}
	next := rc.http.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	check := func(ctx context.Context) error { return cc.CheckCredentials(ctx, r.namespace, r) }
	rc.http = &http.Client{Transport: &checkedTransport{next: next, check: check},
		Timeout: rc.http.Timeout, CheckRedirect: rc.http.CheckRedirect, Jar: rc.http.Jar}
	return rc, nil
}

// checkedTransport runs check with each request's context before the request leaves: the
// check sits below basic auth and the TLS handshake, so nothing of the credentials (nor the
// request itself) reaches the server when it refuses, redirects included.
type checkedTransport struct {
	next  http.RoundTripper
	check func(ctx context.Context) error
}

func (t *checkedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.check(req.Context()); err != nil {
		if req.Body != nil {
			_ = req.Body.Close() // a RoundTripper closes the body, even on error
		}
		return nil, err
	}
	return t.next.RoundTrip(req)
}

// tlsClientFor is the guarded client with the repository's TLS settings, unchecked.
func (s *Source) tlsClientFor(r Repository) (*repoClient, error) {
	if r.Err != nil {
		return nil, fmt.Errorf("%w: chart repository %q: %v", ErrUnreachable, r.Name, r.Err)
	}
	hc := s.client()
	if len(r.CA) == 0 && len(r.CertPEM) == 0 {
		return &repoClient{http: hc, repo: &r}, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(r.CA) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(r.CA) {
			return nil, fmt.Errorf("%w: the CA of chart repository %q holds no PEM certificate", ErrUnreachable, r.Name)
		}
		cfg.RootCAs = pool
	}
	if len(r.CertPEM) > 0 {
		cert, err := tls.X509KeyPair(r.CertPEM, r.KeyPEM)
		if err != nil {
			return nil, fmt.Errorf("%w: the TLS client certificate of chart repository %q: %v", ErrUnreachable, r.Name, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	t, ok := hc.Transport.(*http.Transport)
	if !ok {
		t = http.DefaultTransport.(*http.Transport)
	}
	t = t.Clone()
	t.TLSClientConfig = cfg
	return &repoClient{repo: &r, http: &http.Client{Transport: t, Timeout: hc.Timeout, CheckRedirect: hc.CheckRedirect}}, nil
}

// FetchIndex downloads a repository's index.yaml with its credentials, through the address
// policy, and makes every chart URL in it absolute. Its errors never show the credentials of
// the repository's URL (they reach console-warning and logs).
func (s *Source) FetchIndex(ctx context.Context, r Repository) (*repo.IndexFile, error) {
	idx, err := s.fetchIndex(ctx, r)
	return idx, chartref.RedactError(err)
}

func (s *Source) fetchIndex(ctx context.Context, r Repository) (*repo.IndexFile, error) {
	rc, err := s.clientFor(r)
	if err != nil {
		return nil, err
	}
	indexURL := strings.TrimSuffix(r.URL, "/")
	if !strings.HasSuffix(indexURL, "/index.yaml") {
		indexURL += "/index.yaml"
	}
	raw, err := s.fetchWith(ctx, rc, indexURL, bounds.MaxIndexBytes)
	if err != nil {
		return nil, fmt.Errorf("chart repository %q: %w", r.Name, err)
	}
	// Measured before it is parsed: the parser writes every alias out (pkg/yamlsize).
	size, err := yamlsize.Expanded(raw, bounds.MaxIndexBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: index of chart repository %q: %v", ErrTooLarge, r.Name, err)
	}
	idx, err := s.parseIndex(ctx, r.Name, raw, size.Nodes)
	if err != nil {
		return nil, err
	}
	// Free-form YAML nothing serves (the console's merged index is built from entries):
	// not kept in the index cache.
	idx.ServerInfo = nil
	base := strings.TrimSuffix(indexURL, "index.yaml")
	for name, versions := range idx.Entries {
		kept := versions[:0]
		for _, cv := range versions {
			if cv == nil || cv.Metadata == nil {
				continue // an invalid entry: the console drops it too
			}
			for i, u := range cv.URLs {
				abs, err := repo.ResolveReferenceURL(base, u)
				if err != nil {
					return nil, fmt.Errorf("%w: chart %s of repository %q: %v", ErrUnreachable, name, r.Name, err)
				}
				cv.URLs[i] = abs
			}
			kept = append(kept, cv)
		}
		idx.Entries[name] = kept
	}
	idx.SortEntries()
	return idx, nil
}

// parseIndex parses an index of n nodes (at most bounds.MaxIndexNodes), while the indexes
// parsed at once count at most bounds.MaxIndexNodes together: the index slots bound the fetches, not
// what each parse takes (a real index of 4.5 MiB peaks at ~110 MiB, a denser one of as
// many nodes at ~280 MiB), so one big parse runs alone and small ones together, first
// come first served.
func (s *Source) parseIndex(ctx context.Context, name string, raw []byte, n int64) (*repo.IndexFile, error) {
	if n > bounds.MaxIndexNodes {
		return nil, fmt.Errorf("%w: index of chart repository %q: more than %d YAML nodes", ErrTooLarge, name, bounds.MaxIndexNodes)
	}
	s.parsesOnce.Do(func() { s.parses = semaphore.NewWeighted(bounds.MaxIndexNodes) })
	if err := s.parses.Acquire(ctx, n); err != nil {
		return nil, fmt.Errorf("index of chart repository %q: wait to parse: %w", name, err)
	}
	defer s.parses.Release(n)
	var idx repo.IndexFile
	if err := yaml.Unmarshal(raw, &idx); err != nil {
		return nil, fmt.Errorf("%w: index of chart repository %q: %v", ErrUnreachable, name, err)
	}
	return &idx, nil
}
