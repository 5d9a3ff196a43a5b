package fairqueue

import (
	"errors"
	"slices"
)

// ErrFull is an Acquire refused a place to wait: the room was full and its tenant waited most.
var ErrFull = errors.New("fairqueue: no place to wait")

// room is the cost of the waiting work, in all, per namespace and per caller (MaxWaiting).
type room struct {
	total      int64
	ns, caller map[string]int64
}

func newRoom() room { return room{ns: map[string]int64{}, caller: map[string]int64{}} }

// add counts w in (sign 1) or out (-1).
func (r *room) add(w *waiter, sign int64) {
	if w.cost == 0 {
		return
	}
	d := sign * w.cost
	r.total += d
	bumpNS(r.ns, w.flow.Namespace, d)
	bump(r.caller, w.flow.Caller, d)
}

// makeRoom turns away the newest waiters of whoever holds most of an over-full room (w: false).
func (q *Queue) makeRoom(w *waiter) bool {
	over := q.room.total - q.opts.MaxWaiting
	if q.opts.MaxWaiting <= 0 || over <= 0 {
		return true
	}
	victims := q.victims(over)
	if victims == nil || slices.Contains(victims, w) {
		q.turnAway(w)
		return false
	}
	for _, v := range victims {
		q.turnAway(v)
	}
	return true
}

// turnAway takes v out of the room; its Acquire returns ErrFull.
func (q *Queue) turnAway(v *waiter) {
	q.remove(v)
	v.turnedAway = true
	close(v.ready)
	q.forget(v.flow)
}

// victims are the waiters whose cost makes up over: each the newest of the tenant holding most,
// work not requeued first (its sender sends it again). nil: not enough.
func (q *Queue) victims(over int64) []*waiter {
	chosen, taken := newRoom(), map[Flow]int{}
	var out []*waiter
	for freed := int64(0); freed < over; {
		var best *waiter
		var bestScore int64
		for f, ws := range q.waiting {
			w := newestInRoom(ws, taken[f])
			if w == nil {
				continue
			}
			s := max(q.room.ns[f.Namespace]-chosen.ns[f.Namespace], q.room.caller[f.Caller]-chosen.caller[f.Caller])
			if best == nil || s > bestScore || s == bestScore && turnFirst(w, best) {
				best, bestScore = w, s
			}
		}
		if best == nil {
			return nil
		}
		out = append(out, best)
		chosen.add(best, 1)
		taken[best.flow]++
		freed += best.cost
	}
	return out
}

// turnFirst: of two waiters of tenants holding as much, a is turned away before b.
func turnFirst(a, b *waiter) bool {
	if (a.reuse == nil) != (b.reuse == nil) {
		return a.reuse == nil
	}
	return a.seq > b.seq
}

// newestInRoom is the waiter of ws to turn away after the skip first ones (turnFirst's order).
func newestInRoom(ws []*waiter, skip int) *waiter {
	for _, requeued := range []bool{false, true} {
		for i := len(ws) - 1; i >= 0; i-- {
			if ws[i].cost == 0 || (ws[i].reuse != nil) != requeued {
				continue
			}
			if skip == 0 {
				return ws[i]
			}
			skip--
		}
	}
	return nil
}
