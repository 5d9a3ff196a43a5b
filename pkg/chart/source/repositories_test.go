package source

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/async-helm/async-helm/internal/testchartrepo"
)

// perNamespace are repositories that differ by namespace, as project repositories do.
type perNamespace map[string][]Repository

func (p perNamespace) Repositories(_ context.Context, ns string) []Repository { return p[ns] }

// A chart fetched with one namespace's repository credentials is not served from the cache
// to another namespace, which has no such repository; the entry's chart URL (on the
// repository's host) gets the basic auth, the index is resolved in the request's namespace.
func TestNamespacedRepositoriesAndCache(t *testing.T) {
	dir := t.TempDir()
	if err := testchartrepo.Package(dir, "", filepath.Join("..", "..", "..", "testdata", "charts", "tiny")); err != nil {
		t.Fatal(err)
	}
	files := http.FileServer(http.Dir(dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "reader" || p != "s3cret" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		files.ServeHTTP(w, r)
	}))
	defer srv.Close()
	src := &Source{HTTP: Policy{AllowLoopback: true}.HTTPClient(5 * time.Second), TTL: time.Hour,
		Repos: perNamespace{"team": {{Name: "private", URL: srv.URL, Credentials: Credentials{Username: "reader", Password: "s3cret"}}}}}
	ctx := context.Background()
	if _, err := src.Get(ctx, Ref{IndexEntry: "tiny--private", Namespace: "team"}); err != nil {
		t.Fatalf("index entry in its namespace: %v", err)
	}
	if _, err := src.Get(ctx, Ref{URL: srv.URL + "/tiny-0.1.0.tgz", Namespace: "team"}); err != nil {
		t.Fatalf("chart URL under the repository in its namespace: %v", err)
	}
	if _, err := src.Get(ctx, Ref{IndexEntry: "tiny--private", Namespace: "other"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("index entry in another namespace: %v, want not found", err)
	}
	if _, err := src.Get(ctx, Ref{URL: srv.URL + "/tiny-0.1.0.tgz", Namespace: "other"}); !errors.Is(err, ErrUnreachable) {
		t.Errorf("chart URL from another namespace: %v, want the repository's 401 (not the cached chart)", err)
	}
}
