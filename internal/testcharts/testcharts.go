// Package testcharts serves the charts under testdata/charts over HTTP, as a chart
// repository (index.yaml) and as plain archive URLs, for integration tests.
package testcharts

import (
	"net"
	"path/filepath"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/async-helm/async-helm/internal/testchartrepo"
	"github.com/async-helm/async-helm/internal/testcluster"
)

// Server is a chart repository on loopback.
type Server struct {
	*testchartrepo.Repo
}

// Start serves testdata/charts until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r, err := testchartrepo.Start(filepath.Join(root, "testdata", "charts"), t.TempDir(), ln)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return &Server{Repo: r}
}

// Values reads a values file under testdata/charts.
func Values(t testing.TB, file string) map[string]any {
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
