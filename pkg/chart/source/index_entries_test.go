package source

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

// countingIndex serves an empty index after delay, counting the fetches under way.
type countingIndex struct {
	inFlight, peak, served atomic.Int64
	delay                  time.Duration
}

func (c *countingIndex) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	for p := c.peak.Load(); n > p && !c.peak.CompareAndSwap(p, n); p = c.peak.Load() {
	}
	c.served.Add(1)
	time.Sleep(c.delay)
	_, _ = w.Write([]byte("apiVersion: v1\nentries: {}\n"))
}

// Installs by index entry each download and parse the repository's index (up to 10 MiB,
// several times that parsed), and every distinct chart or version is a flight of its own:
// 20 at once from one tenant held 20 indexes at once in submit (hostile-tenant review). They
// now take their namespace's share of the source's index fetches (FetchSlots: one at a
// time per namespace); another namespace is not held back by them, and a waiter leaves
// with its context.
func TestIndexEntryFetchesAreBounded(t *testing.T) {
	slow, fast := &countingIndex{delay: 100 * time.Millisecond}, &countingIndex{}
	slowSrv, fastSrv := httptest.NewServer(slow), httptest.NewServer(fast)
	defer slowSrv.Close()
	defer fastSrv.Close()
	src := &Source{HTTP: Policy{AllowLoopback: true}.HTTPClient(time.Minute),
		Repos: perNamespace{"evil": {{Name: "slow", URL: slowSrv.URL}}, "team": {{Name: "fast", URL: fastSrv.URL}}}}
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
	time.Sleep(150 * time.Millisecond) // evil's entries are under way
	start := time.Now()
	if _, err := src.Get(context.Background(), Ref{IndexEntry: "x--fast", Namespace: "team"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("team's entry: %v, want not found", err)
	}
	if d := time.Since(start); d > time.Second || slow.inFlight.Load() == 0 {
		t.Errorf("team's index entry took %v (evil's fetches under way: %d), want it not held back", d, slow.inFlight.Load())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := src.Get(ctx, Ref{IndexEntry: "late--slow", Namespace: "evil"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("evil's request waiting for its share: %v, want its context's deadline", err)
	}
	wg.Wait()
	t.Logf("evil's index served %d times, at most %d at once", slow.served.Load(), slow.peak.Load())
	if slow.served.Load() != 20 || slow.peak.Load() > 1 {
		t.Errorf("20 index entries fetched the index %d times, %d at once; want 20, one at a time", slow.served.Load(), slow.peak.Load())
	}
}
