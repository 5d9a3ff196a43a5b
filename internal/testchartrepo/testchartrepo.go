// Package testchartrepo serves a directory of charts as a Helm chart repository (archives and
// index.yaml), for tests, make run and the benchmarks.
package testchartrepo

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/repo"
)

// Repo is a chart repository on loopback.
type Repo struct {
	URL string
	Dir string
	// Downloads counts archive downloads, to show caches work.
	Downloads atomic.Int64
	server    *http.Server
}

// Start packages every chart directory under src (archives are copied as they are) into
// dir and serves them on ln.
func Start(src, dir string, ln net.Listener) (*Repo, error) {
	entries, err := os.ReadDir(src)
	if err != nil {
		return nil, err
	}
	var charts []string
	for _, e := range entries {
		if e.IsDir() || strings.HasSuffix(e.Name(), ".tgz") {
			charts = append(charts, filepath.Join(src, e.Name()))
		}
	}
	r := &Repo{URL: "http://" + ln.Addr().String(), Dir: dir}
	if err := Package(dir, r.URL, charts...); err != nil {
		return nil, err
	}
	files := http.FileServer(http.Dir(dir))
	r.server = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.HasSuffix(req.URL.Path, ".tgz") {
			r.Downloads.Add(1)
		}
		files.ServeHTTP(w, req)
	})}
	go func() { _ = r.server.Serve(ln) }()
	return r, nil
}

// Package makes dir a chart repository: each chart directory packaged (an archive copied as
// it is) and index.yaml, with chart URLs under baseURL ("" leaves them relative, as a
// repository that moves may write them).
func Package(dir, baseURL string, charts ...string) error {
	for _, p := range charts {
		if strings.HasSuffix(p, ".tgz") {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, filepath.Base(p)), b, 0o644); err != nil {
				return err
			}
			continue
		}
		ch, err := loader.LoadDir(p)
		if err != nil {
			return fmt.Errorf("load %s: %w", p, err)
		}
		if _, err := chartutil.Save(ch, dir); err != nil {
			return fmt.Errorf("package %s: %w", p, err)
		}
	}
	idx, err := repo.IndexDirectory(dir, baseURL)
	if err != nil {
		return err
	}
	return idx.WriteFile(filepath.Join(dir, "index.yaml"), 0o644)
}

// ChartURL is the URL of a chart archive, e.g. ChartURL("tiny", "0.1.0").
func (r *Repo) ChartURL(name, version string) string {
	return r.URL + "/" + name + "-" + version + ".tgz"
}

// Close stops serving.
func (r *Repo) Close() error { return r.server.Close() }
