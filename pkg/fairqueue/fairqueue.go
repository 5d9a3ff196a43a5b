// Package fairqueue hands out a pool of slots fairly between tenants (docs/design.md,
// "Tenants and shares"): a free slot goes to the waiting work whose tenant holds the fewest, a
// slot lent by work that only waits to a tenant below its share; none stays free while work waits.
package fairqueue

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Flow is what work is accounted to: a tenant is bounded as namespace and as caller.
type Flow struct{ Namespace, Caller string }

// ErrReleased is a Requeue of a seat given up.
var ErrReleased = errors.New("fairqueue: seat released")

// Options configure a Queue.
type Options struct {
	// Lending lets a seat whose holder waits (Seat.Lend) go to a tenant below its share.
	Lending bool
	// Clock dates the waits (nil: the wall clock).
	Clock clock.PassiveClock
	// Limit, when set, is the most one tenant may hold when nobody else waits (1..slots; nil: all);
	// slots-1 keeps a slot free for whoever comes next (an index fetch may hold its timeout).
	Limit func(Flow) int
	// MaxWaiting, when set, bounds the cost waiting at once: past it the newest waiter of the
	// tenant holding most is turned away (ErrFull): no backlog takes another's place. 0: none.
	MaxWaiting int64
}

// Queue is a pool of slots handed out fairly.
type Queue struct {
	slots int
	opts  Options

	mu   sync.Mutex
	free int
	// seatless counts holders alive without a seat (their lent seat went to another).
	seatless int
	held     counts
	served   served
	waiting  map[Flow][]*waiter
	lent     []*Seat
	seq      uint64
	room     room
}

// New makes a queue of slots (at least 1).
func New(slots int, opts Options) *Queue {
	slots = max(1, slots)
	return &Queue{slots: slots, opts: opts, free: slots, held: counts{ns: map[string]int{}, caller: map[string]int{}, flow: map[Flow]int{}},
		served: served{ns: map[string]uint64{}, caller: map[string]uint64{}}, waiting: map[Flow][]*waiter{}, room: newRoom()}
}

// Slots is the size of the pool.
func (q *Queue) Slots() int { return q.slots }

// InUse is how many holders are alive: with a seat, or without one after lending it.
func (q *Queue) InUse() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.slots - q.free + q.seatless
}

type seatState int

const (
	stateHeld seatState = iota
	stateLent
	// stateGiven: lent and given to another tenant; the holder lives on without a seat.
	stateGiven
	// stateQueued: given back by Requeue, waiting for a seat again.
	stateQueued
	stateReleased
)

// Seat is one slot held by a flow's work; cost is what its Acquire held of the room.
type Seat struct {
	q     *Queue
	flow  Flow
	state seatState
	cost  int64
}

// waiter is work waiting for a seat (reuse: a Requeue's seat; resumed: a Resume).
type waiter struct {
	flow       Flow
	since      time.Time
	seq        uint64
	reuse      *Seat
	cost       int64
	resumed    bool
	seat       *Seat
	turnedAway bool
	ready      chan struct{}
}

// Acquire waits in f's queue until a seat is granted (held even if granted as ctx ends).
func (q *Queue) Acquire(ctx context.Context, f Flow) (*Seat, error) {
	return q.AcquireCost(ctx, f, 1)
}

// AcquireCost is Acquire of work holding cost (at least 1) of the room: ErrFull if turned away.
func (q *Queue) AcquireCost(ctx context.Context, f Flow, cost int64) (*Seat, error) {
	q.mu.Lock()
	w := q.enqueue(f, nil, false)
	w.cost = max(cost, 1)
	q.room.add(w, 1)
	q.dispatch()
	if w.seat == nil && !q.makeRoom(w) {
		q.mu.Unlock()
		return nil, ErrFull
	}
	q.mu.Unlock()
	return q.wait(ctx, w)
}

// Resume is Acquire of started work that gave its seat back for a while: it waits ahead of
// its tenant's work not started, behind what resumed before; the tenants' turns are unchanged.
func (q *Queue) Resume(ctx context.Context, f Flow) (*Seat, error) {
	q.mu.Lock()
	w := q.enqueue(f, nil, true)
	q.dispatch()
	q.mu.Unlock()
	return q.wait(ctx, w)
}

// TryAcquire takes a seat only if one is free for f now (a free seat is one no waiter may take).
func (q *Queue) TryAcquire(f Flow) (*Seat, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.free == 0 || !q.mayTake(f) {
		return nil, false
	}
	q.free--
	seat := &Seat{q: q, flow: f, state: stateHeld}
	q.held.add(f, 1)
	q.served.mark(f)
	return seat, true
}

// Release gives the seat back (or ends a seatless holder's account); a second does nothing.
func (s *Seat) Release() {
	q := s.q
	q.mu.Lock()
	defer q.mu.Unlock()
	switch s.state {
	case stateHeld, stateLent:
		q.unlend(s)
		q.held.add(s.flow, -1)
		q.free++
	case stateGiven:
		q.seatless--
	}
	s.state = stateReleased
	q.dispatch()
	q.forget(s.flow)
}

// Lend says the holder only waits: with Lending, the seat may go to a tenant below its share.
func (s *Seat) Lend() {
	q := s.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.opts.Lending || s.state != stateHeld {
		return
	}
	s.state = stateLent
	q.lent = append(q.lent, s)
	q.dispatch()
}

// Reclaim ends a Lend: a seat given away is not waited for (a wait could outlast the deadline).
func (s *Seat) Reclaim() {
	q := s.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if s.state == stateLent {
		q.unlend(s)
		s.state = stateHeld
	}
}

// Requeue gives the seat back and waits at the back of the flow's queue again (between a
// retry's attempts), holding its room: a full room turns it away (ErrFull, the seat given up).
func (s *Seat) Requeue(ctx context.Context) error {
	q := s.q
	q.mu.Lock()
	switch s.state {
	case stateHeld, stateLent:
		q.unlend(s)
		q.held.add(s.flow, -1)
		q.free++
	case stateGiven:
		q.seatless--
	default:
		q.mu.Unlock()
		return ErrReleased
	}
	s.state = stateQueued
	w := q.enqueue(s.flow, s, false)
	w.cost = s.cost
	q.room.add(w, 1)
	q.dispatch()
	if w.seat == nil && !q.makeRoom(w) {
		s.state = stateReleased
		q.mu.Unlock()
		return ErrFull
	}
	q.mu.Unlock()
	_, err := q.wait(ctx, w)
	return err
}

func (q *Queue) wait(ctx context.Context, w *waiter) (*Seat, error) {
	select {
	case <-w.ready:
	case <-ctx.Done():
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if w.seat != nil {
		return w.seat, nil
	}
	if w.reuse != nil {
		w.reuse.state = stateReleased // a Requeue that got no seat holds nothing
	}
	if w.turnedAway {
		return nil, ErrFull
	}
	q.remove(w)
	q.dispatch()
	q.forget(w.flow)
	return nil, ctx.Err()
}
