package executor

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/fairqueue"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/release"
)

// recordReads counts the reads that decode a release's records (Get, LiveHistory), per
// namespace.
type recordReads struct {
	Store
	mu sync.Mutex
	n  map[string]int
}

func (r *recordReads) Get(ctx context.Context, namespace, name string, revision int) (*helmrelease.Release, error) {
	r.add(namespace)
	return r.Store.Get(ctx, namespace, name, revision)
}

func (r *recordReads) LiveHistory(ctx context.Context, namespace, name string) ([]release.Revision, error) {
	r.add(namespace)
	return r.Store.LiveHistory(ctx, namespace, name)
}

func (r *recordReads) add(ns string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n[ns]++
}

func (r *recordReads) count(ns string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[ns]
}

// The executor's admission decodes the release's records, which their tenant can write
// (its namespace; up to release.MaxRecordBytes each): CPU-bound work, taken in a CPU slot
// of the action's flow as Helm's render is. With the one CPU slot held by A's render, B's
// delivery, on a free action slot, decodes nothing: it waits in B's queue of the CPU pool,
// and deploys once the slot is free. Before, admission read on its action slot alone, so
// MAX_PARALLEL deliveries decoded at once beside the CPU slots, outside any tenant's share.
func TestAdmissionDecodesRecordsInACPUSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 4)
		e.svc.cpu = fairqueue.New(1, fairqueue.Options{}) // CPUSlots 1
		reads := &recordReads{Store: e.store, n: map[string]int{}}
		e.svc.Store = reads
		rendered := make(chan struct{})
		e.helm.run = func(ctx context.Context, req helmexec.Request) (*helmrelease.Release, error) {
			if req.Namespace == "a" {
				<-rendered // A's render holds the CPU slot
			}
			return e.writes(ctx, req)
		}
		outcomes := make(chan string, 2)
		handle := func(ns, user, name string) {
			a := e.reserveAs(ns, user, name, ns+"-1")
			go func() {
				o, err := e.svc.Handle(ctx(t), context.Background(), a, nil)
				outcomes <- fmt.Sprintf("%s %s %v", ns, o, err)
			}()
			synctest.Wait()
		}
		handle("a", "alice", "big")
		handle("b", "bob", "tiny")
		if n := reads.count("b"); n != 0 {
			t.Errorf("B's admission read %d records while A's render held the only CPU slot: it decoded outside the CPU pool", n)
		}
		if _, cpu := e.svc.Shares(); !queuedIn(cpu, "b") {
			t.Errorf("B is not queued for a CPU slot while A renders: %+v", cpu)
		}
		close(rendered)
		for range 2 {
			if got := <-outcomes; got != got[:1]+" deployed <nil>" {
				t.Errorf("outcome: %s", got)
			}
		}
		if reads.count("b") == 0 {
			t.Error("B's admission never read its record")
		}
	})
}

// queuedIn reports whether namespace ns has work queued in stats.
func queuedIn(stats []fairqueue.FlowStats, ns string) bool {
	for _, st := range stats {
		if st.Namespace == ns && st.Queued > 0 {
			return true
		}
	}
	return false
}
