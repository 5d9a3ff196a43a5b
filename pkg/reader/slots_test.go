package reader

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/fakekube"
	"github.com/async-helm/async-helm/pkg/auth"
	"github.com/async-helm/async-helm/pkg/release"
)

// heldIndex holds every metadata list of namespace held until release is closed (a page in
// flight), counting how many are in flight at once.
type heldIndex struct {
	held              string
	release           chan struct{}
	inFlight, maxSeen atomic.Int32
}

func (h *heldIndex) ReleaseMetas(ctx context.Context, ns string) ([]*metav1.PartialObjectMetadata, error) {
	if ns != h.held {
		return nil, nil
	}
	n := h.inFlight.Add(1)
	defer h.inFlight.Add(-1)
	for m := h.maxSeen.Load(); n > m && !h.maxSeen.CompareAndSwap(m, n); m = h.maxSeen.Load() {
	}
	select {
	case <-h.release:
	case <-ctx.Done():
	}
	return nil, nil
}

// One caller's many concurrent lists hold at most all but one of the read slots: the rest
// wait their turn, and another tenant's list is read meanwhile (each list held a page and
// a read's budget, as many as the caller sent at once).
func TestOneCallersConcurrentListsWaitTheirTurn(t *testing.T) {
	idx := &heldIndex{held: "team-a", release: make(chan struct{})}
	a := &authz{may: map[string]map[string]bool{"alice": {"team-a": true}, "bob": {"team-b": true}}}
	s := &Service{Secrets: &release.Store{Client: fakekube.New(fakekube.NewClock(time.Now())).Typed()}, Index: idx, Authorizer: a}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const lists = 10
	var wg sync.WaitGroup
	for range lists {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = s.List(ctx, &auth.User{Name: "alice"}, "team-a", true)
		}()
	}
	for waiting := 0; int(idx.inFlight.Load())+waiting < lists; runtime.Gosched() {
		if ctx.Err() != nil {
			t.Fatal("alice's lists neither read nor waited")
		}
		waiting = 0
		if s.slots != nil {
			for _, st := range s.slots.Stats() {
				waiting += st.Queued
			}
		}
	}
	if _, err := s.List(ctx, &auth.User{Name: "bob"}, "team-b", true); err != nil {
		t.Fatalf("bob's list while alice's wait: %v", err)
	}
	close(idx.release)
	wg.Wait()
	if n := idx.maxSeen.Load(); n > readSlots-1 {
		t.Errorf("%d of alice's lists read at once, want at most %d", n, readSlots-1)
	}
}
