package source

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
)

// A namespace that fills the chart cache pushes out its own least recently used charts,
// not another namespace's older one.
func TestCacheEvictsTheLargestNamespaceFirst(t *testing.T) {
	s := &Source{MaxCacheBytes: 4 << 20, byKey: map[string]*cached{}}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	put := func(ns string, i int) {
		key := fmt.Sprintf("%s|chart-%d", ns, i)
		s.byKey[key] = &cached{chart: &Chart{Digest: key, size: 1<<20 - keyBytes}, namespace: ns, used: at}
		at = at.Add(time.Second)
		s.evict()
	}
	put("team", 0)
	for i := range 10 {
		put("burst", i)
	}
	if _, ok := s.byKey["team|chart-0"]; !ok {
		t.Errorf("team's one chart was evicted by burst's ten (cache: %d entries)", len(s.byKey))
	}
	if _, ok := s.byKey["burst|chart-9"]; !ok || len(s.byKey) != 4 {
		t.Errorf("cache holds %d entries (burst's newest kept: %v), want 4 with it", len(s.byKey), ok)
	}
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
		src.mu.Lock()
		n := src.cachedBytes()
		src.mu.Unlock()
		if n > max {
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

// One tiny chart asked under 200 URLs that differ in a 1 MiB fragment (never sent: the
// server sees one path) grew the heap 201 MiB while the cache counted 1,985 bytes: each key
// held its URL and none was counted. A key is a digest without the fragment now.
func TestTheCacheCountsItsKeys(t *testing.T) {
	archive := tgz(t, chartYAML("tiny"))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(archive) }))
	t.Cleanup(srv.Close)
	const bound = 16 << 20
	src := &Source{HTTP: Policy{AllowLoopback: true}.HTTPClient(time.Minute), MaxCacheBytes: bound}
	pad := strings.Repeat("a", 1<<20)
	before := heapNow()
	for i := range 200 {
		if _, err := src.Get(context.Background(), Ref{URL: fmt.Sprintf("%s/chart.tgz#%s%d", srv.URL, pad, i), Namespace: "mallory"}); err != nil {
			t.Fatal(err)
		}
	}
	grew := int64(heapNow()) - int64(before)
	src.mu.Lock()
	keys := len(src.byKey)
	src.mu.Unlock()
	if grew > 2*bound || keys != 1 {
		t.Errorf("the chart cache (bound %d MiB) holds %d keys and made the heap grow %d MiB", bound>>20, keys, grew>>20)
	}
	runtime.KeepAlive(src)
}

// Keys count against the cache's bound: one tiny chart under ever new URLs (a query each,
// sent to the server) pushes out its older keys, whatever their number.
func TestKeysOfOneChartAreEvicted(t *testing.T) {
	u := serve(t, tgz(t, chartYAML("tiny")))
	const bound = 64 << 10
	src := &Source{HTTP: Policy{AllowLoopback: true}.HTTPClient(time.Minute), MaxCacheBytes: bound}
	for i := range 500 {
		if _, err := src.Get(context.Background(), Ref{URL: fmt.Sprintf("%s?%d", u, i), Namespace: "mallory"}); err != nil {
			t.Fatal(err)
		}
	}
	src.mu.Lock()
	defer src.mu.Unlock()
	if n := src.cachedBytes(); n > bound || len(src.byKey) > bound/keyBytes {
		t.Errorf("500 keys of one chart: the cache holds %d keys, counts %d bytes; want within %d", len(src.byKey), n, bound)
	}
}

func heapNow() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
