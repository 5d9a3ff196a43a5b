package source

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/registry"
)

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
	start := time.Now()
	_, err := src.Get(ctx, Ref{URL: "oci://" + addr + "/charts/slow", Version: "1.0.0"})
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the pull went on %s after its context ended (err %v)", took.Round(time.Millisecond), err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled pull: %v, want the context's error", err)
	}
	t.Logf("the pull ended %s after it started (context deadline 300ms)", time.Since(start).Round(time.Millisecond))
}

// archive is a chart of files templates of size bytes each (hex: an archive of about half
// that, which unpacks to size).
func archive(t *testing.T, name string, files, size int) []byte {
	t.Helper()
	ch := &chart.Chart{Metadata: &chart.Metadata{APIVersion: "v2", Name: name, Version: "1.0.0"}}
	for i := 0; i < files; i++ {
		data := make([]byte, size/2)
		_, _ = rand.Read(data)
		ch.Templates = append(ch.Templates, &chart.File{Name: fmt.Sprintf("templates/blob%d.txt", i), Data: []byte(hex.EncodeToString(data))})
	}
	path, err := chartutil.Save(ch, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The cache holds at most its size in bytes, least recently used out first, and does not
// keep a chart bigger than itself.
func TestChartCacheIsBoundedInBytes(t *testing.T) {
	charts := map[string][]byte{}
	for _, n := range []string{"a", "b", "c", "d"} {
		charts["/"+n+".tgz"] = archive(t, n, 1, 1<<20)
	}
	charts["/huge.tgz"] = archive(t, "huge", 2, 3<<20)
	var mu sync.Mutex
	downloads := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := charts[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		downloads[r.URL.Path]++
		mu.Unlock()
		_, _ = w.Write(b)
	}))
	defer srv.Close()
	const max = 4 << 20 // each small chart holds ~1.5 MiB (archive + unpacked): two fit, not three
	src := &Source{HTTP: Policy{AllowLoopback: true}.HTTPClient(time.Minute), MaxCacheBytes: max}
	get := func(name string) {
		t.Helper()
		if _, err := src.Get(context.Background(), Ref{URL: srv.URL + "/" + name + ".tgz"}); err != nil {
			t.Fatal(err)
		}
		if n := src.CachedBytes(); n > max {
			t.Fatalf("after %s the cache holds %d bytes, over its %d", name, n, max)
		}
	}
	get("a")
	get("b")
	get("a") // a is now more recently used than b
	get("c") // evicts b, not a
	get("a")
	get("b")
	mu.Lock()
	if downloads["/a.tgz"] != 1 || downloads["/b.tgz"] != 2 {
		t.Errorf("downloads %v: want a once (recently used, kept) and b twice (least recently used, evicted)", downloads)
	}
	mu.Unlock()
	for _, n := range []string{"d", "huge", "huge"} {
		get(n)
	}
	mu.Lock()
	defer mu.Unlock()
	if downloads["/huge.tgz"] != 2 {
		t.Errorf("a chart bigger than the cache was downloaded %d times for 2 requests, want 2 (never cached)", downloads["/huge.tgz"])
	}
}

// Credentials in a chart URL never appear in the error, whichever way the fetch fails.
func TestCredentialsInChartURLsAreRedacted(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	src := &Source{HTTP: Policy{AllowLoopback: true}.HTTPClient(10 * time.Second), PlainHTTPRegistries: []string{host}}
	guarded := &Source{HTTP: Policy{}.HTTPClient(10 * time.Second)}
	for _, c := range []struct {
		src  *Source
		url  string
		want error
	}{
		{src, "http://alice:s3cr3t-pw@" + host + "/missing.tgz", ErrNotFound},
		{src, "https://alice:s3cr3t-pw@" + host + "/tls-to-plain.tgz", ErrUnreachable},
		{src, "http://alice:s3cr3t-pw@127.0.0.1:1/refused.tgz", ErrUnreachable},
		{guarded, "http://alice:s3cr3t-pw@169.254.169.254/latest/meta-data", ErrForbiddenHost},
		{src, "oci://alice:s3cr3t-pw@" + host + "/charts/missing:1.0.0", nil},
		{src, "http://alice:s3cr3t pw@" + host + "/unparsable.tgz", ErrInvalidRef},
	} {
		_, err := c.src.Get(context.Background(), Ref{URL: c.url})
		if err == nil || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%s: %v, want %v", c.url, err, c.want)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, "s3cr3t") || strings.Contains(msg, "alice") {
			t.Errorf("the error shows the URL's credentials: %s", msg)
		}
	}
}
