package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/async-helm/async-helm/pkg/release/consumed"
)

// gatedLedger is a Ledger on a fake cluster whose first Lease create waits for gate, so
// that requests arrive while a write is in flight; fail makes every create fail.
func gatedLedger(gate chan struct{}, fail error) (*Ledger, *fake.Clientset) {
	c := fake.NewClientset()
	var once sync.Once
	c.PrependReactor("create", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		once.Do(func() { <-gate })
		return fail != nil, nil, fail
	})
	return &Ledger{Store: &Store{Client: c, Namespace: "async-helm"}, Book: NewBook(time.Hour, nil)}, c
}

// addAll adds an entry per id, each from its own goroutine, and returns their errors.
func addAll(l *Ledger, ids ...string) func() []error {
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() { errs[i] = l.Add(context.Background(), entry(id, "ns-"+id, "c", i)) })
	}
	return func() []error { wg.Wait(); return errs }
}

// The requests that come while a ledger write is in flight are written together, in one
// Lease, once it returns; each returns only once its entry is written, and is counted.
func TestRequestsDuringAWriteShareTheNextOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		l, c := gatedLedger(gate, nil)
		first := addAll(l, "r0")
		synctest.Wait() // r0's write is in flight
		rest := addAll(l, "r1", "r2", "r3")
		synctest.Wait()
		if got := l.Book.Counts("ns-r1", "c").Total; got != 0 {
			t.Fatalf("counted %d before any write returned", got)
		}
		close(gate)
		for _, err := range append(first(), rest()...) {
			if err != nil {
				t.Fatal(err)
			}
		}
		list, err := c.CoordinationV1().Leases("async-helm").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var held [][]string
		for _, le := range list.Items {
			es, ok := EntriesOf(&le)
			if !ok {
				t.Fatalf("%s is no ledger Lease", le.Name)
			}
			var ids []string
			for _, e := range es {
				ids = append(ids, e.RequestID)
			}
			slices.Sort(ids)
			held = append(held, ids)
		}
		slices.SortFunc(held, func(a, b []string) int { return len(a) - len(b) })
		if fmt.Sprint(held) != "[[r0] [r1 r2 r3]]" {
			t.Errorf("Leases hold %v, want r0 alone and r1-r3 in one", held)
		}
		if got := l.Book.Counts("x", "c"); got.Total != 4 || got.Caller != 4 {
			t.Errorf("counts %+v, want the 4 entries", got)
		}
	})
}

// A failed write fails every request of its batch: none is told it was recorded.
func TestAFailedBatchWriteFailsEachOfItsRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		boom := errors.New("etcd is down")
		l, _ := gatedLedger(gate, boom)
		first := addAll(l, "r0")
		synctest.Wait()
		rest := addAll(l, "r1", "r2")
		synctest.Wait()
		close(gate)
		for i, err := range append(first(), rest()...) {
			if !errors.Is(err, boom) {
				t.Errorf("request %d: %v, want the write's error", i, err)
			}
		}
		if got := l.Book.Counts("x", "c").Total; got != 0 {
			t.Errorf("%d counted after failed writes", got)
		}
	})
}

// A batch Lease's entries count one by one; the Lease is deleted once none counts, and
// its deletion forgets them all.
func TestABatchLeaseIsDeletedOnceNoneOfItsEntriesCounts(t *testing.T) {
	c := testingclock.NewFakeClock(t0)
	b := NewBook(time.Hour, c)
	l, err := toBatchLease([]Entry{entry("r1", "a", "x", 0), entry("r2", "a", "x", 1), entry("r3", "b", "y", 2)})
	if err != nil {
		t.Fatal(err)
	}
	es, ok := EntriesOf(l)
	if !ok || len(es) != 3 || es[1] != entry("r2", "a", "x", 1) {
		t.Fatalf("entries read back: %v %+v", ok, es)
	}
	b.AddedBatch(l.Name, es)
	b.AddedBatch(l.Name, es) // the watch's sight of this replica's write
	if got := b.Counts("a", "x"); got.Total != 3 || got.Namespace != 2 || got.Caller != 2 {
		t.Fatalf("counts %+v", got)
	}
	b.Consumed(consumed.LeaseName("r1"))
	b.Consumed(consumed.LeaseName("r3"))
	if stale := b.Expire(); len(stale) != 0 {
		t.Errorf("to delete %v while r2 counts", stale)
	}
	if got := b.Counts("a", "x").Total; got != 1 {
		t.Errorf("total %d, want r2 alone", got)
	}
	c.Step(2 * time.Hour) // r2 expires
	if stale := b.Expire(); !slices.Equal(stale, []string{l.Name}) {
		t.Errorf("to delete %v, want the batch %s", stale, l.Name)
	}
	b.Removed(l.Name)
	if len(b.entries) != 0 || len(b.leases) != 0 {
		t.Errorf("the deleted batch left %d entries, %d leases", len(b.entries), len(b.leases))
	}
}

// A Lease that is not a whole batch counts nothing, and a batch keeps only its whole
// entries.
func TestBatchFromMetaRefusesWhatIsNotABatch(t *testing.T) {
	lease := func(name, entries string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{Label: "true"}, Annotations: map[string]string{annEntries: entries}}}
	}
	for _, tc := range []struct {
		name string
		l    *coordinationv1.Lease
		want int // -1: not a batch
	}{
		{"not JSON", lease(batchPrefix+"x", "{"), -1},
		{"not named as a batch", lease("ledger-abc", `[]`), -1},
		{"an entry without request id or time is left out", lease(batchPrefix+"x",
			`[{"r":"","n":"a","a":"2026-12-06T01:00:00Z"},{"r":"r1","n":"a"},{"r":"r2","n":"a","s":"s","a":"2026-12-06T01:00:00Z"}]`), 1},
	} {
		es, ok := batchFromMeta(tc.l)
		if got := len(es); (tc.want < 0 && ok) || (tc.want >= 0 && (!ok || got != tc.want)) {
			t.Errorf("%s: %d entries, ok %v; want %d", tc.name, got, ok, tc.want)
		}
	}
}

// A batch's write serves every request of it: it lasts while any of them waits, whatever
// the others' contexts, and ends once the last has given up.
func TestABatchWriteEndsWhenTheLastOfItsRequestsGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		l, _ := gatedLedger(gate, nil)
		first := addAll(l, "r0")
		synctest.Wait()
		ctx1, cancel1 := context.WithCancel(context.Background())
		ctx2, cancel2 := context.WithCancel(context.Background())
		errs := make(chan error, 2)
		go func() { errs <- l.Add(ctx1, entry("r1", "a", "c", 1)) }()
		go func() { errs <- l.Add(ctx2, entry("r2", "a", "c", 2)) }()
		synctest.Wait()
		b := l.commits.open
		cancel1()
		synctest.Wait()
		if b.ctx.Err() != nil {
			t.Fatal("the batch's write ended while r2 still waits for it")
		}
		cancel2()
		synctest.Wait()
		if b.ctx.Err() == nil {
			t.Error("the batch's write goes on after every request of it gave up")
		}
		for range 2 {
			if err := <-errs; !errors.Is(err, context.Canceled) {
				t.Errorf("a request that gave up: %v", err)
			}
		}
		close(gate)
		if err := first()[0]; err != nil {
			t.Fatal(err)
		}
	})
}

// A Ledger whose Clock is injected (submit's tests inject a FakeClock nobody steps while
// requests wait) still writes every request: the linger before the next write does not
// wait on a clock that does not move.
func TestAnInjectedClockDoesNotParkTheWriter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		l, _ := gatedLedger(gate, nil)
		l.Clock = testingclock.NewFakeClock(t0)
		first := addAll(l, "r0")
		synctest.Wait() // r0's write is in flight
		errs := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			errs <- l.Add(ctx, entry("r1", "ns-r1", "c", 1))
		}()
		synctest.Wait() // r1 joined the open batch
		close(gate)
		if err := first()[0]; err != nil {
			t.Fatal(err)
		}
		if err := <-errs; err != nil {
			t.Errorf("the request that came during a write: %v; want it written (the writer waits on the injected clock)", err)
		}
	})
}
