// Package fairslots shares a fixed number of slots between tenants. A tenant is a caller
// and a namespace, each counted on its own: a user with many namespaces is one caller, a
// namespace with many users is one namespace. It is work-conserving: a free slot goes to
// someone who waits whenever anyone may take it, so a tenant alone may hold them all. When
// several wait, a freed slot goes to the one whose caller or namespace holds the fewest
// (the earliest of those), so a tenant holding more than its share gets no more until the
// others have theirs.
package fairslots

import (
	"context"
	"fmt"
	"sync"
)

// Tenant is who takes a slot.
type Tenant struct {
	Caller, Namespace string
}

// Slots are total slots shared between tenants; see the package comment.
type Slots struct {
	total int
	limit func(Tenant) int

	mu    sync.Mutex
	free  int
	held  map[string]int // by key (callerKey, namespaceKey); only keys holding a slot
	queue []*waiter      // in arrival order
}

type waiter struct {
	t       Tenant
	ready   chan struct{}
	granted bool
}

// New is total slots. limit, when set, bounds what one tenant may hold even when nobody
// else waits (at most total); nil: a tenant alone may hold every slot.
func New(total int, limit func(Tenant) int) *Slots {
	total = max(total, 1)
	return &Slots{total: total, limit: limit, free: total, held: map[string]int{}}
}

// Total is the number of slots.
func (s *Slots) Total() int { return s.total }

func callerKey(t Tenant) string    { return "caller/" + t.Caller }
func namespaceKey(t Tenant) string { return "namespace/" + t.Namespace }

// load is what a tenant's caller or namespace holds, whichever is more.
func (s *Slots) load(t Tenant) int { return max(s.held[callerKey(t)], s.held[namespaceKey(t)]) }

// mayTake says whether t is under its limit.
func (s *Slots) mayTake(t Tenant) bool {
	if s.limit == nil {
		return true
	}
	return s.load(t) < min(max(s.limit(t), 1), s.total)
}

// Acquire waits until ctx ends for a slot.
func (s *Slots) Acquire(ctx context.Context, t Tenant) (release func(), err error) {
	w := &waiter{t: t, ready: make(chan struct{})}
	s.mu.Lock()
	s.queue = append(s.queue, w)
	s.dispatch()
	s.mu.Unlock()
	select {
	case <-w.ready:
		return s.releaser(t), nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.granted { // granted while ctx ended: given back
		s.put(t)
		s.dispatch()
	} else {
		s.remove(w)
	}
	return nil, fmt.Errorf("wait for one of %d slots: %w", s.total, ctx.Err())
}

// TryAcquire takes a slot only if one is free for t now (it never jumps the queue: a free
// slot is one no waiter may take).
func (s *Slots) TryAcquire(t Tenant) (release func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.free == 0 || !s.mayTake(t) {
		return nil, false
	}
	s.take(t)
	return s.releaser(t), true
}

func (s *Slots) releaser(t Tenant) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.put(t)
			s.dispatch()
		})
	}
}

// dispatch hands free slots to waiters: each to the least loaded one that may take it,
// the earliest of equals.
func (s *Slots) dispatch() {
	for s.free > 0 {
		best := -1
		for i, w := range s.queue {
			if s.mayTake(w.t) && (best < 0 || s.load(w.t) < s.load(s.queue[best].t)) {
				best = i
			}
		}
		if best < 0 {
			return
		}
		w := s.queue[best]
		s.queue = append(s.queue[:best], s.queue[best+1:]...)
		s.take(w.t)
		w.granted = true
		close(w.ready)
	}
}

func (s *Slots) take(t Tenant) {
	s.free--
	s.held[callerKey(t)]++
	s.held[namespaceKey(t)]++
}

// put gives a slot back; keys holding nothing are forgotten (tenants cannot grow the map).
func (s *Slots) put(t Tenant) {
	s.free++
	for _, k := range []string{callerKey(t), namespaceKey(t)} {
		if s.held[k]--; s.held[k] <= 0 {
			delete(s.held, k)
		}
	}
}

func (s *Slots) remove(w *waiter) {
	for i, q := range s.queue {
		if q == w {
			s.queue = append(s.queue[:i], s.queue[i+1:]...)
			return
		}
	}
}

// Held is what t's caller and namespace hold now (for tests and metrics).
func (s *Slots) Held(t Tenant) (caller, namespace int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held[callerKey(t)], s.held[namespaceKey(t)]
}
