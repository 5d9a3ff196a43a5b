package fairslots

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
)

func ten(caller, namespace string) Tenant { return Tenant{Caller: caller, Namespace: namespace} }

// Who gets a freed slot: holders take their slots first, waiters then queue in order, one
// holder releases, and exactly the waiter named gets the slot.
func TestSlots(t *testing.T) {
	admin := ten("refresh", "")
	keepOne := func(t Tenant) int {
		if t == admin {
			return 3
		}
		return 4
	}
	for _, c := range []struct {
		name    string
		total   int
		limit   func(Tenant) int
		holders []Tenant
		waiters []Tenant
		release int // index in holders
		want    int // index in waiters
	}{
		{name: "a caller with four namespaces does not take the freed slot from another caller",
			total: 4, holders: []Tenant{ten("a", "a1"), ten("a", "a2"), ten("a", "a3"), ten("a", "a4")},
			waiters: []Tenant{ten("a", "a5"), ten("b", "b1")}, release: 0, want: 1},
		{name: "a namespace with many users is one namespace",
			total: 2, holders: []Tenant{ten("u1", "x"), ten("u2", "x")},
			waiters: []Tenant{ten("u3", "x"), ten("v", "y")}, release: 1, want: 1},
		{name: "equal loads: the earliest",
			total: 1, holders: []Tenant{ten("a", "a")},
			waiters: []Tenant{ten("b", "b"), ten("c", "c")}, release: 0, want: 0},
		{name: "the one holding fewer of two waiting callers",
			total: 4, holders: []Tenant{ten("a", "a"), ten("a", "a"), ten("a", "a"), ten("b", "b")},
			waiters: []Tenant{ten("a", "a"), ten("b", "b")}, release: 0, want: 1},
		{name: "alone, a caller takes the freed slot (work-conserving)",
			total: 2, holders: []Tenant{ten("a", "a"), ten("b", "b")},
			waiters: []Tenant{ten("a", "a")}, release: 1, want: 0},
		{name: "a limited tenant at its limit waits, the next one goes",
			total: 4, limit: keepOne, holders: []Tenant{admin, admin, admin, ten("t", "t")},
			waiters: []Tenant{admin, ten("t", "t")}, release: 3, want: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				if got := whoGetsTheFreedSlot(t, New(c.total, c.limit), c.holders, c.waiters, c.release); got != c.want {
					t.Errorf("waiter %d got the slot, want waiter %d (%v)", got, c.want, c.waiters[c.want])
				}
			})
		})
	}
}

// whoGetsTheFreedSlot has holders take their slots, waiters queue in order, holder release
// let go of its slot, and returns the one waiter that got it (-1: none).
func whoGetsTheFreedSlot(t *testing.T, s *Slots, holders, waiters []Tenant, release int) int {
	releases := make([]func(), len(holders))
	for i, h := range holders {
		r, ok := s.TryAcquire(h)
		if !ok {
			t.Fatalf("holder %d (%v) found no free slot", i, h)
		}
		releases[i] = r
	}
	granted := make(chan int, len(waiters))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i, w := range waiters {
		go func() {
			if _, err := s.Acquire(ctx, w); err == nil {
				granted <- i
			}
		}()
		synctest.Wait() // queued, in this order
	}
	releases[release]()
	synctest.Wait()
	if len(granted) > 1 {
		t.Errorf("%d waiters got a slot, want one", len(granted))
	}
	select {
	case got := <-granted:
		return got
	default:
		return -1
	}
}

func TestAloneTakesEverySlotAndLimitsHold(t *testing.T) {
	s := New(4, nil)
	for i := range 4 {
		if _, ok := s.TryAcquire(ten("a", "a")); !ok {
			t.Fatalf("slot %d: refused to a tenant alone", i)
		}
	}
	if _, ok := s.TryAcquire(ten("b", "b")); ok {
		t.Errorf("a fifth slot of 4 given")
	}
	admin := ten("refresh", "")
	l := New(4, func(t Tenant) int {
		if t == admin {
			return 3
		}
		return 4
	})
	for range 3 {
		if _, ok := l.TryAcquire(admin); !ok {
			t.Fatal("the limited tenant refused under its limit")
		}
	}
	if _, ok := l.TryAcquire(admin); ok {
		t.Errorf("the limited tenant took a slot over its limit")
	}
	if _, ok := l.TryAcquire(ten("t", "t")); !ok {
		t.Errorf("the slot kept free was refused to another tenant")
	}
}

// A waiter whose context ends leaves the queue; a released slot is forgotten by its keys.
func TestWaiterLeavesAndKeysAreForgotten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(1, nil)
		release, _ := s.TryAcquire(ten("a", "a"))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := s.Acquire(ctx, ten("b", "b"))
			done <- err
		}()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("a waiter whose context ended: %v, want context.Canceled", err)
		}
		release()
		release() // twice is once
		if c, n := s.Held(ten("a", "a")); c != 0 || n != 0 || len(s.held) != 0 || len(s.queue) != 0 || s.free != 1 {
			t.Errorf("after release: held %d/%d, keys %d, queue %d, free %d; want nothing held or queued", c, n, len(s.held), len(s.queue), s.free)
		}
	})
}
