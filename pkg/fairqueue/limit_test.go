package fairqueue

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
)

// The chart pools' cases (index fetches, renders): holders take their seats at once, waiters
// then queue in order, one holder releases, and exactly the waiter named gets the seat.
func TestWhoGetsTheFreedSeat(t *testing.T) {
	admin := Flow{Caller: "refresh"}
	keepOne := func(f Flow) int {
		if f == admin {
			return 3
		}
		return 4
	}
	fl := func(caller, ns string) Flow { return Flow{Caller: caller, Namespace: ns} }
	for _, c := range []struct {
		name    string
		slots   int
		limit   func(Flow) int
		holders []Flow
		waiters []Flow
		release int // index in holders
		want    int // index in waiters
	}{
		{name: "a caller with four namespaces does not take the freed seat from another caller",
			slots: 4, holders: []Flow{fl("a", "a1"), fl("a", "a2"), fl("a", "a3"), fl("a", "a4")},
			waiters: []Flow{fl("a", "a5"), fl("b", "b1")}, release: 0, want: 1},
		{name: "a namespace with many users is one namespace",
			slots: 2, holders: []Flow{fl("u1", "x"), fl("u2", "x")},
			waiters: []Flow{fl("u3", "x"), fl("v", "y")}, release: 1, want: 1},
		{name: "equal loads: the earliest",
			slots: 1, holders: []Flow{fl("a", "a")},
			waiters: []Flow{fl("b", "b"), fl("c", "c")}, release: 0, want: 0},
		{name: "the one holding fewer of two waiting callers",
			slots: 4, holders: []Flow{fl("a", "a"), fl("a", "a"), fl("a", "a"), fl("b", "b")},
			waiters: []Flow{fl("a", "a"), fl("b", "b")}, release: 0, want: 1},
		{name: "alone, a caller takes the freed seat (work-conserving)",
			slots: 2, holders: []Flow{fl("a", "a"), fl("b", "b")},
			waiters: []Flow{fl("a", "a")}, release: 1, want: 0},
		{name: "work with no namespace is its caller's alone: another caller's is not held back",
			slots: 4, limit: func(Flow) int { return 3 },
			holders: []Flow{fl("mallory", ""), fl("mallory", ""), fl("mallory", ""), fl("c", "c")},
			waiters: []Flow{fl("mallory", ""), fl("bob", "")}, release: 3, want: 1},
		{name: "a limited tenant at its limit waits, the next one goes",
			slots: 4, limit: keepOne, holders: []Flow{admin, admin, admin, fl("t", "t")},
			waiters: []Flow{admin, fl("t", "t")}, release: 3, want: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := New(c.slots, Options{Limit: c.limit})
				if got := whoGetsTheFreedSeat(t, q, c.holders, c.waiters, c.release); got != c.want {
					t.Errorf("waiter %d got the seat, want waiter %d (%v)", got, c.want, c.waiters[c.want])
				}
			})
		})
	}
}

// whoGetsTheFreedSeat has holders take their seats, waiters queue in order, holder release
// let go of its seat, and returns the one waiter that got it (-1: none).
func whoGetsTheFreedSeat(t *testing.T, q *Queue, holders, waiters []Flow, release int) int {
	seats := make([]*Seat, len(holders))
	for i, h := range holders {
		s, ok := q.TryAcquire(h)
		if !ok {
			t.Fatalf("holder %d (%v) found no free seat", i, h)
		}
		seats[i] = s
	}
	granted := make(chan int, len(waiters))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i, w := range waiters {
		go func() {
			if _, err := q.Acquire(ctx, w); err == nil {
				granted <- i
			}
		}()
		synctest.Wait() // queued, in this order
	}
	seats[release].Release()
	synctest.Wait()
	if len(granted) > 1 {
		t.Errorf("%d waiters got a seat, want one", len(granted))
	}
	select {
	case got := <-granted:
		return got
	default:
		return -1
	}
}

func TestAloneTakesEverySeatAndLimitsHold(t *testing.T) {
	q := New(4, Options{})
	for i := range 4 {
		if _, ok := q.TryAcquire(Flow{Caller: "a", Namespace: "a"}); !ok {
			t.Fatalf("seat %d: refused to a tenant alone", i)
		}
	}
	if _, ok := q.TryAcquire(Flow{Caller: "b", Namespace: "b"}); ok {
		t.Errorf("a fifth seat of 4 given")
	}
	admin := Flow{Caller: "refresh"}
	l := New(4, Options{Limit: func(f Flow) int {
		if f == admin {
			return 3
		}
		return 4
	}})
	for range 3 {
		if _, ok := l.TryAcquire(admin); !ok {
			t.Fatal("the limited tenant refused under its limit")
		}
	}
	if _, ok := l.TryAcquire(admin); ok {
		t.Errorf("the limited tenant took a seat over its limit")
	}
	if _, ok := l.TryAcquire(Flow{Caller: "t", Namespace: "t"}); !ok {
		t.Errorf("the seat kept free was refused to another tenant")
	}
}

// A waiter whose context ends leaves the queue; a released seat is forgotten by its tenant.
func TestWaiterLeavesAndTenantsAreForgotten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(1, Options{})
		a := Flow{Caller: "a", Namespace: "a"}
		seat, _ := q.TryAcquire(a)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := q.Acquire(ctx, Flow{Caller: "b", Namespace: "b"})
			done <- err
		}()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("a waiter whose context ended: %v, want context.Canceled", err)
		}
		seat.Release()
		seat.Release() // twice is once
		c, n := q.Held(a)
		if c != 0 || n != 0 || len(q.held.ns)+len(q.held.caller)+len(q.held.flow) != 0 || len(q.waiting) != 0 || q.free != 1 ||
			len(q.served.ns)+len(q.served.caller) != 0 {
			t.Errorf("after release: held %d/%d, keys %d, waiting %d, free %d; want nothing held or queued", c, n,
				len(q.held.ns)+len(q.held.caller), len(q.waiting), q.free)
		}
	})
}

// Held is what f's caller and namespace hold now.
func (q *Queue) Held(f Flow) (caller, namespace int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.held.caller[f.Caller], q.held.ns[f.Namespace]
}
