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
// entry "<chart>--<repo>"), URL and credentials. Err is why its configuration cannot be
// used (a CA ConfigMap missing): every use fails with it, never tries without credentials.
type Repository struct {
	Name string
	URL  string
	Credentials
	Err       error
	namespace string // resolved for (reposFor), for a CredentialChecker
}

// Credentials of one chart repository: basic auth, the CA its server certificate is
// checked with (PEM; the system roots when empty), and a TLS client certificate (PEM).
type Credentials struct {
	Username, Password string
	CA                 []byte
	CertPEM, KeyPEM    []byte
}

// CredentialChecker, as Source.Checker, is asked before every request that carries a
// repository's credentials: a repository created while a request waits must not make the
// fetcher send Secrets its caller may not read (docs/design.md). A refusal fails the fetch
// before anything reaches the server.
type CredentialChecker interface {
	CheckCredentials(ctx context.Context, namespace string, r Repository) error
}

// Repositories are the chart repositories each namespace sees, one per name (package repos).
type Repositories interface {
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
// behind it: its repositories come without credentials; the CA still checks the server.
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

// forURL is the client of the repository namespace sees that a chart URL is under (the
// longest prefix), or the default client.
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

// repoClient fetches from one repository: its client (CA, client certificate), and its
// basic auth, sent to the repository's own host.
type repoClient struct {
	http *http.Client
	repo *Repository
}

// authorize adds the basic auth to a request for the repository's scheme and host only
// (as Helm's PassCredentialsAll=false).
func (rc *repoClient) authorize(req *http.Request) {
	if rc.repo == nil || rc.repo.Username == "" {
		return
	}
	base, err := url.Parse(rc.repo.URL)
	if err == nil && base.Scheme == req.URL.Scheme && base.Host == req.URL.Host {
		req.SetBasicAuth(rc.repo.Username, rc.repo.Password)
	}
}

// clientFor is the guarded client with the repository's TLS settings; with a Checker, every
// request carrying credentials is checked first.
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

// checkedTransport runs check before each request leaves, below basic auth and the TLS
// handshake: nothing reaches the server when it refuses, redirects included.
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
// policy, and makes every chart URL in it absolute; its errors show no credentials.
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
	idx.ServerInfo = nil // free-form YAML nothing serves: not kept
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

// parseIndex parses an index of n nodes, while the indexes parsed at once count at most
// bounds.MaxIndexNodes together: a parse takes what its nodes make (a real index of 4.5
// MiB peaks at ~110 MiB, a denser one at ~280 MiB), so a big one runs alone.
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
