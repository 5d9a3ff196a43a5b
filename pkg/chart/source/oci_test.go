package source

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
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

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// hostileRegistry is an OCI registry whose chart "big" claims a 64 MiB layer and streams it
// for as long as anyone reads, and whose chart "slow" never answers its manifest.
func hostileRegistry(t *testing.T) (addr string, served *atomic.Int64) {
	t.Helper()
	served = &atomic.Int64{}
	config := []byte(`{"name":"big","version":"1.0.0","apiVersion":"v2"}`)
	layerSize := int64(64 << 20)
	layerDigest := digest([]byte("never served whole"))
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        map[string]any{"mediaType": registry.ConfigMediaType, "digest": digest(config), "size": len(config)},
		"layers":        []any{map[string]any{"mediaType": registry.ChartLayerMediaType, "digest": layerDigest, "size": layerSize}},
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v2/":
			w.WriteHeader(http.StatusOK)
		case strings.HasPrefix(r.URL.Path, "/v2/charts/slow/"):
			select { // hangs until the client gives up
			case <-r.Context().Done():
			case <-time.After(30 * time.Second):
			}
		case strings.HasSuffix(r.URL.Path, "/manifests/1.0.0"):
			w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
			w.Header().Set("Docker-Content-Digest", digest(manifest))
			w.Header().Set("Content-Length", fmt.Sprint(len(manifest)))
			if r.Method != http.MethodHead {
				_, _ = w.Write(manifest)
			}
		case strings.HasSuffix(r.URL.Path, "/blobs/"+digest(config)):
			_, _ = w.Write(config)
		case strings.HasSuffix(r.URL.Path, "/blobs/"+layerDigest):
			w.Header().Set("Content-Length", fmt.Sprint(layerSize))
			chunk := make([]byte, 64<<10)
			for sent := int64(0); sent < layerSize; sent += int64(len(chunk)) {
				n, err := w.Write(chunk)
				served.Add(int64(n))
				if err != nil {
					return
				}
			}
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), served
}

// An oci:// pull stops at the 20 MiB a chart may have, whatever the registry claims or sends.
func TestOCIPullIsCappedLikeADownload(t *testing.T) {
	addr, served := hostileRegistry(t)
	src := &Source{HTTP: Policy{AllowLoopback: true}.HTTPClient(time.Minute), PlainHTTPRegistries: []string{addr}}
	_, err := src.Get(context.Background(), Ref{URL: "oci://" + addr + "/charts/big", Version: "1.0.0"})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("pull of a 64 MiB layer: %v, want %v", err, ErrTooLarge)
	}
	if n := served.Load(); n > 40<<20 {
		t.Errorf("the registry sent %d MiB before the pull stopped", n>>20)
	} else {
		t.Logf("the registry wrote %.1f MiB of the 64 MiB layer before the pull stopped", float64(n)/(1<<20))
	}
}

// An oci:// pull ends with its request's context, as a download does.
func TestOCIPullIsCancelledWithItsContext(t *testing.T) {
	addr, _ := hostileRegistry(t)
	src := &Source{HTTP: Policy{AllowLoopback: true}.HTTPClient(time.Minute), PlainHTTPRegistries: []string{addr}}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	// The registry answers "slow" only when the client gives up (or after 30 s, with no
	// manifest): the context's error says the pull ended with it.
	_, err := src.Get(ctx, Ref{URL: "oci://" + addr + "/charts/slow", Version: "1.0.0"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled pull: %v, want the context's error", err)
	}
}
