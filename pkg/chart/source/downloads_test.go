package source

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/async-helm/async-helm/internal/testwait"
	"github.com/async-helm/async-helm/pkg/chart/bounds"
)

// A tenant's server sends each of 16 distinct chart URLs its first 20 MiB less a byte, then
// holds the connection (up to bounds.DownloadTime), for 16 installs of one caller at once:
// all 16 bodies were held in submit's heap together (445 MiB). Chart fetches take the
// source's fetch slots, of which a tenant holds at most all but one: its bodies in flight
// are bounded, and another tenant's chart is fetched meanwhile.
func TestChartDownloadsInFlightAreBounded(t *testing.T) {
	const n = 16
	body := make([]byte, bounds.DefaultArchiveBytes-1)
	var sent atomic.Int64
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(body)
		w.(http.Flusher).Flush()
		sent.Add(1)
		select { // the last byte never comes
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	src := &Source{HTTP: Policy{AllowLoopback: true}.HTTPClient(bounds.DownloadTime)}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	ctx, cancel := context.WithTimeout(WithCaller(context.Background(), Caller{User: "mallory"}), 50*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = src.Get(ctx, Ref{URL: fmt.Sprintf("%s/c%d.tgz", srv.URL, i), Namespace: "mallory"})
		}()
	}
	// The bodies a tenant may hold are sent; another tenant's chart is fetched meanwhile.
	testwait.For(t, func() bool { return sent.Load() >= bounds.MaxIndexFetches-1 })
	other, err := src.Get(WithCaller(t.Context(), Caller{User: "bob"}), Ref{URL: serve(t, tgz(t, chartYAML("tiny"))), Namespace: "bob"})
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d downloads by one caller of one namespace: the server sent %d bodies of 20 MiB; heap held %d MiB after GC while they wait for their last byte",
		n, sent.Load(), held>>20)
	cancel()
	wg.Wait()
	if most := int64(bounds.MaxIndexFetches-1) * 2 * bounds.DefaultArchiveBytes; held > most || sent.Load() > bounds.MaxIndexFetches-1 {
		t.Errorf("one tenant's %d concurrent chart downloads: %d sent, %d MiB held; want at most %d in flight, %d MiB", n, sent.Load(), held>>20,
			bounds.MaxIndexFetches-1, most>>20)
	}
	if err != nil || other == nil {
		t.Errorf("another tenant's chart meanwhile: %v", err)
	}
}
