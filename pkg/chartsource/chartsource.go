// Package chartsource resolves chart references (archive URL, console index entry
// "<chart>--<repo>", oci://), downloads charts and caches them by URL and digest.
package chartsource

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/registry"
	"helm.sh/helm/v3/pkg/repo"
	"sigs.k8s.io/yaml"

	"github.com/async-helm/async-helm/pkg/chartref"
)

// Sentinel errors, mapped to status codes at the edge.
var (
	ErrInvalidRef  = chartref.ErrInvalid
	ErrNotFound    = errors.New("chart not found")
	ErrUnloadable  = errors.New("chart cannot be loaded")
	ErrTooLarge    = errors.New("chart archive too large")
	ErrUnreachable = errors.New("chart source unreachable")
)

// Ref names a chart; see package chartref.
type Ref = chartref.Ref

// Chart is a downloaded chart archive. Loaded is parsed once and shared: treat it as
// read-only; Fresh gives a private copy for Helm actions, which mutate charts.
type Chart struct {
	Digest string
	Data   []byte
	Loaded *chart.Chart
}

// Fresh parses the archive again into a chart the caller owns.
func (c *Chart) Fresh() (*chart.Chart, error) {
	ch, err := loader.LoadArchive(bytes.NewReader(c.Data))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnloadable, err)
	}
	return ch, nil
}

// Source fetches charts through a cache.
type Source struct {
	HTTP *http.Client
	// Repositories maps a repository name to its URL, for index entries.
	Repositories map[string]string
	// Credentials of repositories (by name), applied to every URL under the repository's.
	Credentials map[string]Credentials
	// PlainHTTPRegistries are OCI registry hosts (host:port) spoken to over plain HTTP.
	PlainHTTPRegistries []string
	MaxBytes            int64
	TTL                 time.Duration
	// MaxEntries bounds the cache (least recently used entries are dropped).
	MaxEntries int

	mu      sync.Mutex
	byKey   map[string]*cached
	flights map[string]*flight
}

type cached struct {
	chart   *Chart
	fetched time.Time
	used    time.Time
}

type flight struct {
	done chan struct{}
	c    *Chart
	err  error
}

// Get returns the chart a reference names, downloading it at most once per TTL
// (concurrent requests for one key share a single download).
func (s *Source) Get(ctx context.Context, ref Ref) (*Chart, error) {
	if err := ref.Validate(); err != nil {
		return nil, err
	}
	key := ref.URL + "@" + ref.Version + "#" + ref.IndexEntry
	s.mu.Lock()
	if s.byKey == nil {
		s.byKey, s.flights = map[string]*cached{}, map[string]*flight{}
	}
	if c, ok := s.byKey[key]; ok && (s.TTL <= 0 || time.Since(c.fetched) < s.TTL) {
		c.used = time.Now()
		s.mu.Unlock()
		return c.chart, nil
	}
	if f, ok := s.flights[key]; ok {
		s.mu.Unlock()
		select {
		case <-f.done:
			return f.c, f.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f := &flight{done: make(chan struct{})}
	s.flights[key] = f
	s.mu.Unlock()

	f.c, f.err = s.fetch(ctx, ref)
	s.mu.Lock()
	delete(s.flights, key)
	if f.err == nil {
		s.byKey[key] = &cached{chart: s.dedupe(f.c), fetched: time.Now(), used: time.Now()}
		f.c = s.byKey[key].chart
		s.evict()
	}
	s.mu.Unlock()
	close(f.done)
	return f.c, f.err
}

// dedupe shares one parsed chart between keys that resolve to the same digest.
func (s *Source) dedupe(c *Chart) *Chart {
	for _, e := range s.byKey {
		if e.chart.Digest == c.Digest {
			return e.chart
		}
	}
	return c
}

func (s *Source) evict() {
	max := s.MaxEntries
	if max <= 0 {
		max = 64
	}
	for len(s.byKey) > max {
		var oldest string
		for k, e := range s.byKey {
			if oldest == "" || e.used.Before(s.byKey[oldest].used) {
				oldest = k
			}
		}
		delete(s.byKey, oldest)
	}
}

func (s *Source) fetch(ctx context.Context, ref Ref) (*Chart, error) {
	var data []byte
	var err error
	switch {
	case ref.IndexEntry != "":
		data, err = s.fetchIndexEntry(ctx, ref)
	case strings.HasPrefix(ref.URL, "oci://"):
		data, err = s.fetchOCI(ref)
	default:
		data, err = s.download(ctx, ref.URL)
	}
	if err != nil {
		return nil, err
	}
	ch, err := loader.LoadArchive(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrUnloadable, ref, err)
	}
	if ref.Version != "" && ref.IndexEntry == "" && ch.Metadata.Version != ref.Version {
		return nil, fmt.Errorf("%w: %s is version %s, not %s", ErrNotFound, ref.URL, ch.Metadata.Version, ref.Version)
	}
	sum := sha256.Sum256(data)
	return &Chart{Digest: "sha256:" + hex.EncodeToString(sum[:]), Data: data, Loaded: ch}, nil
}

func (s *Source) maxBytes() int64 {
	if s.MaxBytes > 0 {
		return s.MaxBytes
	}
	return 20 << 20
}

func (s *Source) download(ctx context.Context, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidRef, err)
	}
	rc, err := s.forURL(u)
	if err != nil {
		return nil, err
	}
	if rc.creds.Username != "" {
		req.SetBasicAuth(rc.creds.Username, rc.creds.Password)
	}
	resp, err := rc.http.Do(req)
	if errors.Is(err, ErrForbiddenHost) {
		return nil, fmt.Errorf("%w (%s)", ErrForbiddenHost, u)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, fmt.Errorf("%w: %s answered 404", ErrNotFound, u)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return nil, fmt.Errorf("%w: %s answered %s (check the repository's credentials)", ErrUnreachable, u, resp.Status)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("%w: %s answered %s", ErrUnreachable, u, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, s.maxBytes()+1))
	if err != nil {
		return nil, fmt.Errorf("%w: read %s: %v", ErrUnreachable, u, err)
	}
	if int64(len(data)) > s.maxBytes() {
		return nil, fmt.Errorf("%w: %s is over %d bytes", ErrTooLarge, u, s.maxBytes())
	}
	return data, nil
}

func (s *Source) fetchIndexEntry(ctx context.Context, ref Ref) ([]byte, error) {
	name, repoName, err := chartref.SplitIndexEntry(ref.IndexEntry)
	if err != nil {
		return nil, err
	}
	repoURL, ok := s.Repositories[repoName]
	if !ok {
		return nil, fmt.Errorf("%w: no chart repository %q is configured", ErrNotFound, repoName)
	}
	raw, err := s.download(ctx, strings.TrimSuffix(repoURL, "/")+"/index.yaml")
	if err != nil {
		return nil, err
	}
	var idx repo.IndexFile
	if err := yaml.Unmarshal(raw, &idx); err != nil {
		return nil, fmt.Errorf("%w: index of repository %q: %v", ErrUnreachable, repoName, err)
	}
	idx.SortEntries()
	cv, err := idx.Get(name, ref.Version)
	if err != nil || len(cv.URLs) == 0 {
		return nil, fmt.Errorf("%w: %s version %q in repository %q", ErrNotFound, name, ref.Version, repoName)
	}
	chartURL, err := repo.ResolveReferenceURL(repoURL, cv.URLs[0])
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidRef, err)
	}
	return s.download(ctx, chartURL)
}

func (s *Source) fetchOCI(ref Ref) ([]byte, error) {
	opts := []registry.ClientOption{}
	if s.HTTP != nil {
		opts = append(opts, registry.ClientOptHTTPClient(s.HTTP))
	}
	host := strings.SplitN(strings.TrimPrefix(ref.URL, "oci://"), "/", 2)[0]
	for _, h := range s.PlainHTTPRegistries {
		if h == host {
			opts = append(opts, registry.ClientOptPlainHTTP())
		}
	}
	client, err := registry.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: registry client: %v", ErrUnreachable, err)
	}
	target := strings.TrimPrefix(ref.URL, "oci://")
	if ref.Version != "" && !strings.Contains(target[strings.LastIndex(target, "/")+1:], ":") {
		target += ":" + ref.Version
	}
	res, err := client.Pull(target, registry.PullOptWithChart(true))
	if errors.Is(err, ErrForbiddenHost) {
		return nil, fmt.Errorf("%w (%s)", ErrForbiddenHost, ref.URL)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrNotFound, ref.URL, err)
	}
	return res.Chart.Data, nil
}

// ParseRepositories reads "name=url,name=url".
func ParseRepositories(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		name, url, ok := strings.Cut(kv, "=")
		if !ok || name == "" || url == "" {
			return nil, fmt.Errorf("chart repository %q: want name=url", kv)
		}
		out[name] = url
	}
	return out, nil
}
