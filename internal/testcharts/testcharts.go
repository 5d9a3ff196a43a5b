// Package testcharts serves the charts under testdata/charts over HTTP, as a chart
// repository (index.yaml) and as plain archive URLs, for integration tests.
package testcharts

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/repo"

	"github.com/async-helm/async-helm/internal/testcluster"
)

// Server is a chart repository on loopback.
type Server struct {
	*httptest.Server
	// Downloads counts archive downloads, to show the chart cache works.
	Downloads atomic.Int64
	dir       string
}

// Start packages every chart directory under testdata/charts (archives are served as
// they are) and serves them until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(root, "testdata", "charts")
	dir := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		p := filepath.Join(src, e.Name())
		switch {
		case e.IsDir():
			ch, err := loader.LoadDir(p)
			if err != nil {
				t.Fatalf("load %s: %v", p, err)
			}
			if _, err := chartutil.Save(ch, dir); err != nil {
				t.Fatalf("package %s: %v", p, err)
			}
		case strings.HasSuffix(e.Name(), ".tgz"):
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	s := &Server{dir: dir}
	files := http.FileServer(http.Dir(dir))
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, ".tgz") {
			s.Downloads.Add(1)
		}
		files.ServeHTTP(w, r)
	}))
	idx, err := repo.IndexDirectory(dir, s.URL)
	if err != nil {
		t.Fatal(err)
	}
	if err := idx.WriteFile(filepath.Join(dir, "index.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// URL of a chart archive, e.g. ChartURL("tiny", "0.1.0").
func (s *Server) ChartURL(name, version string) string {
	return s.URL + "/" + name + "-" + version + ".tgz"
}

// Values reads a values file under testdata/charts.
func Values(t testing.TB, file string) map[string]interface{} {
	t.Helper()
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	v, err := chartutil.ReadValuesFile(filepath.Join(root, "testdata", "charts", file))
	if err != nil {
		t.Fatal(err)
	}
	return v
}
