package chartsource

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Installs by index entry each download and parse the repository's index (up to 10 MiB,
// several times that parsed), and every distinct chart or version is a flight of its own:
// 20 at once from one tenant held 20 indexes at once in submit (hostile-tenant review). They
// now take at most MaxParallelIndexEntries at a time; the others wait, or leave with their
// context.
func TestIndexEntryFetchesAreBounded(t *testing.T) {
	var inFlight, peak, served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		served.Add(1)
		time.Sleep(100 * time.Millisecond)
		_, _ = w.Write([]byte("apiVersion: v1\nentries: {}\n"))
	}))
	defer srv.Close()
	src := &Source{HTTP: Policy{AllowLoopback: true}.HTTPClient(time.Minute),
		Repos: perNamespace{"evil": {{Name: "slow", URL: srv.URL}}}}
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := src.Get(context.Background(), Ref{IndexEntry: fmt.Sprintf("c%d--slow", i), Namespace: "evil"})
			if !errors.Is(err, ErrNotFound) {
				t.Errorf("entry c%d: %v, want not found", i, err)
			}
		}()
	}
	wg.Wait()
	t.Logf("index.yaml served %d times, at most %d at once", served.Load(), peak.Load())
	if served.Load() != 20 || peak.Load() > 2 {
		t.Errorf("20 index entries fetched the index %d times, %d at once; want 20, at most 2 at once", served.Load(), peak.Load())
	}

	// A request that finds every slot taken leaves when its context ends.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	for i := 0; i < 2; i++ {
		go func() {
			_, _ = src.Get(context.Background(), Ref{IndexEntry: fmt.Sprintf("busy%d--slow", i), Namespace: "evil"})
		}()
	}
	time.Sleep(20 * time.Millisecond)
	start := time.Now()
	_, err := src.Get(ctx, Ref{IndexEntry: "late--slow", Namespace: "evil"})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > time.Second {
		t.Errorf("a request waiting for a slot: %v after %v, want its context's deadline", err, time.Since(start))
	}
}
