package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/distribution/distribution/v3/configuration"
	dockerregistry "github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/registry"

	"github.com/async-helm/async-helm/internal/testwait"
)

// oci:// references, from a real OCI registry (distribution, in process, on loopback) to
// which the chart is pushed with Helm's own registry client.
func TestOCIReferences(t *testing.T) {
	addr := startRegistry(t)
	root := filepath.Join("..", "..", "..") // the repository
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
	push(t, data, addr+"/charts/tiny:0.1.0")

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

// startRegistry runs a registry (distribution, in memory) on loopback.
func startRegistry(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := &configuration.Configuration{}
	cfg.HTTP.Addr = addr
	cfg.HTTP.DrainTimeout = time.Second
	cfg.Storage = map[string]configuration.Parameters{"inmemory": map[string]any{}}
	cfg.Log.Level = "error"
	cfg.Log.AccessLog.Disabled = true
	reg, err := dockerregistry.NewRegistry(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = reg.ListenAndServe() }()
	t.Cleanup(func() { _ = reg.Shutdown(context.Background()) })
	return addr
}

// push pushes a chart archive with Helm's registry client, once the registry answers.
func push(t *testing.T, data []byte, ref string) {
	t.Helper()
	pusher, err := registry.NewClient(registry.ClientOptPlainHTTP(), registry.ClientOptWriter(&bytes.Buffer{}))
	if err != nil {
		t.Fatal(err)
	}
	// The registry starts in the background: the push is tried until it answers.
	testwait.Within(t, 10*time.Second, "the chart pushed", func() bool {
		_, err = pusher.Push(data, ref)
		return err == nil
	})
}

// An oci:// pull goes through the unpack budget like a download.
func TestOCIPullIsCheckedAgainstTheBudget(t *testing.T) {
	addr := startRegistry(t)
	push(t, bomb(t, 2, 4<<20), addr+"/charts/bomb:0.1.0")
	src := &Source{HTTP: Policy{AllowLoopback: true}.HTTPClient(10 * time.Second), PlainHTTPRegistries: []string{addr},
		Budget: Budget{MaxBytes: 6 << 20}}
	_, err := src.Get(context.Background(), Ref{URL: "oci://" + addr + "/charts/bomb", Version: "0.1.0"})
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "unpacks to more than 6 MiB across its nested archives") {
		t.Errorf("oci:// bomb: %v, want ErrTooLarge naming the bound", err)
	}
}
