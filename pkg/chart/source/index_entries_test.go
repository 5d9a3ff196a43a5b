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

	"github.com/async-helm/async-helm/pkg/chart/bounds"
)

// countingIndex serves an empty index, counting the fetches under way; with a gate, each
// fetch says it started and answers only once the gate is closed.
type countingIndex struct {
	inFlight, peak, served atomic.Int64
	gate, started          chan struct{}
}

func (c *countingIndex) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	for p := c.peak.Load(); n > p && !c.peak.CompareAndSwap(p, n); p = c.peak.Load() {
	}
	c.served.Add(1)
	if c.gate != nil {
		c.started <- struct{}{}
		select {
		case <-c.gate:
		case <-r.Context().Done():
			return
		}
	}
	_, _ = w.Write([]byte("apiVersion: v1\nentries: {}\n"))
}

// Installs by index entry each download and parse the repository's index (up to 10 MiB,
// several times that parsed), and every distinct chart or version is a flight of its own.
// They take their caller's and namespace's share of the source's index fetches
// (FetchSlots): 20 at once from one tenant hold all slots but one, another tenant is not
// held back by them, and a waiter leaves with its context.
func TestIndexEntryFetchesAreBounded(t *testing.T) {
	slow := &countingIndex{gate: make(chan struct{}), started: make(chan struct{}, 20)}
	fast := &countingIndex{}
	slowSrv, fastSrv := httptest.NewServer(slow), httptest.NewServer(fast)
	defer slowSrv.Close()
	defer fastSrv.Close()
	src := &Source{HTTP: Policy{AllowLoopback: true}.HTTPClient(time.Minute),
		Repos: perNamespace{"evil": {{Name: "slow", URL: slowSrv.URL}}, "team": {{Name: "fast", URL: fastSrv.URL}}}}
	evil := WithCaller(context.Background(), Caller{User: "evil"})
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := src.Get(evil, Ref{IndexEntry: fmt.Sprintf("c%d--slow", i), Namespace: "evil"}); !errors.Is(err, ErrNotFound) {
				t.Errorf("entry c%d: %v, want not found", i, err)
			}
		}()
	}
	for range bounds.MaxIndexFetches - 1 { // evil's fetches hold their slots
		<-slow.started
	}
	// Held back, it would wait for the gate: the deadline only ends a hang.
	team, cancel := context.WithTimeout(WithCaller(context.Background(), Caller{User: "team"}), time.Minute)
	defer cancel()
	if _, err := src.Get(team, Ref{IndexEntry: "x--fast", Namespace: "team"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("team's entry while evil's fetches are under way: %v, want not found", err)
	}
	late, cancelLate := context.WithTimeout(evil, 50*time.Millisecond)
	defer cancelLate()
	if _, err := src.Get(late, Ref{IndexEntry: "late--slow", Namespace: "evil"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("evil's request waiting for its share: %v, want its context's deadline", err)
	}
	close(slow.gate)
	wg.Wait()
	t.Logf("evil's index served %d times, at most %d at once", slow.served.Load(), slow.peak.Load())
	if slow.served.Load() != 20 || slow.peak.Load() > bounds.MaxIndexFetches-1 {
		t.Errorf("20 index entries fetched the index %d times, %d at once; want 20, at most %d at once",
			slow.served.Load(), slow.peak.Load(), bounds.MaxIndexFetches-1)
	}
}
