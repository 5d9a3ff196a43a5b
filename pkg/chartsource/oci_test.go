package chartsource

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/distribution/distribution/v3/configuration"
	dockerregistry "github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/registry"

	"github.com/async-helm/async-helm/internal/testcluster"
)

// oci:// references, from a real OCI registry (distribution, in process, on loopback) to
// which the chart is pushed with Helm's own registry client.
func TestOCIReferences(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := &configuration.Configuration{}
	cfg.HTTP.Addr = addr
	cfg.HTTP.DrainTimeout = time.Second
	cfg.Storage = map[string]configuration.Parameters{"inmemory": map[string]interface{}{}}
	cfg.Log.Level = "error"
	cfg.Log.AccessLog.Disabled = true
	reg, err := dockerregistry.NewRegistry(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = reg.ListenAndServe() }()
	t.Cleanup(func() { _ = reg.Shutdown(context.Background()) })

	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ch, err := loader.LoadDir(filepath.Join(root, "testdata", "charts", "tiny"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path, err := chartutil.Save(ch, dir)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pusher, err := registry.NewClient(registry.ClientOptPlainHTTP(), registry.ClientOptWriter(&bytes.Buffer{}))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ { // the registry starts in the background
		if _, err = pusher.Push(data, addr+"/charts/tiny:0.1.0"); err == nil || i == 50 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("push: %v", err)
	}

	src := &Source{HTTP: Policy{AllowLoopback: true}.HTTPClient(10 * time.Second), PlainHTTPRegistries: []string{addr}}
	for _, ref := range []Ref{{URL: "oci://" + addr + "/charts/tiny", Version: "0.1.0"}, {URL: "oci://" + addr + "/charts/tiny:0.1.0"}} {
		c, err := src.Get(context.Background(), ref)
		if err != nil || c.Loaded.Metadata.Name != "tiny" || c.Loaded.Metadata.Version != "0.1.0" {
			t.Fatalf("%v: %v", ref, err)
		}
	}
	if _, err := src.Get(context.Background(), Ref{URL: "oci://" + addr + "/charts/nope", Version: "1.0.0"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing chart: %v, want not found", err)
	}
	// The address policy holds for registries too.
	guarded := &Source{HTTP: Policy{}.HTTPClient(10 * time.Second), PlainHTTPRegistries: []string{addr}}
	if _, err := guarded.Get(context.Background(), Ref{URL: fmt.Sprintf("oci://%s/charts/tiny", addr), Version: "0.1.0"}); !errors.Is(err, ErrForbiddenHost) {
		t.Errorf("loopback registry without permission: %v, want forbidden host", err)
	}
}
