package fairqueue

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/async-helm/async-helm/pkg/wallclock"
)

// counts are the seats held per namespace, per caller and per flow.
type counts struct {
	ns, caller map[string]int
	flow       map[Flow]int
}

func (c counts) add(f Flow, d int) {
	bumpNS(c.ns, f.Namespace, d)
	bump(c.caller, f.Caller, d)
	bump(c.flow, f, d)
}

// bumpNS is bump for a namespace: work with none is its caller's alone.
func bumpNS[V int | int64](m map[string]V, ns string, d V) {
	if ns != "" {
		bump(m, ns, d)
	}
}

// bump adds d to m[k], deleting the entry at 0.
func bump[K comparable, V int | int64](m map[K]V, k K, d V) {
	if m[k] += d; m[k] == 0 {
		delete(m, k)
	}
}

// score is how much of the pool f's tenant holds (namespace or caller).
func (q *Queue) score(f Flow) int { return max(q.held.ns[f.Namespace], q.held.caller[f.Caller]) }

// shares are each active namespace's and caller's share: max(1, slots/active).
func (q *Queue) shares() (ns, caller int) {
	nss, callers := map[string]bool{}, map[string]bool{}
	for k := range q.held.ns {
		nss[k] = true
	}
	for k := range q.held.caller {
		callers[k] = true
	}
	for f := range q.waiting {
		nss[f.Namespace], callers[f.Caller] = true, true
	}
	delete(nss, "")
	return max(1, q.slots/max(1, len(nss))), max(1, q.slots/max(1, len(callers)))
}

// enqueue adds work at the back of f's queue (resumed work ahead of the rest).
func (q *Queue) enqueue(f Flow, reuse *Seat, resumed bool) *waiter {
	q.seq++
	w := &waiter{flow: f, since: wallclock.Or(q.opts.Clock).Now(), seq: q.seq, reuse: reuse, resumed: resumed, ready: make(chan struct{})}
	ws := q.waiting[f]
	at := len(ws)
	if resumed {
		at = 0
		for at < len(ws) && ws[at].resumed {
			at++
		}
	}
	q.waiting[f] = slices.Insert(ws, at, w)
	return w
}

func (q *Queue) remove(w *waiter) {
	ws := q.waiting[w.flow]
	for i, x := range ws {
		if x == w {
			ws = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	q.room.add(w, -1)
	if len(ws) == 0 {
		delete(q.waiting, w.flow)
		return
	}
	q.waiting[w.flow] = ws
}

// dispatch grants seats while work waits and a seat can be had: a free one, or one lent.
func (q *Queue) dispatch() {
	for {
		w := q.next()
		switch {
		case w == nil:
			return
		case q.free > 0:
			q.free--
			q.grant(w)
		case !q.lendTo(w):
			return
		}
	}
}

// mayTake says whether f's tenant is below Options.Limit.
func (q *Queue) mayTake(f Flow) bool {
	if q.opts.Limit == nil {
		return true
	}
	return q.score(f) < min(max(q.opts.Limit(f), 1), q.slots)
}

// next is the head of the flow whose tenant holds the fewest seats (below its limit), then
// was served least recently, then waited longest; within that tenant, resumed work first.
func (q *Queue) next() *waiter {
	best := q.first(func(*waiter) bool { return true })
	if best == nil || best.resumed {
		return best
	}
	if w := q.first(func(w *waiter) bool { return w.resumed && sameTenant(w.flow, best.flow) }); w != nil {
		return w
	}
	return best
}

// sameTenant: the flows share their namespace (not none) or their caller.
func sameTenant(a, b Flow) bool {
	return a.Namespace != "" && a.Namespace == b.Namespace || a.Caller == b.Caller
}

// first is next's order over the flows whose head keep accepts.
func (q *Queue) first(keep func(*waiter) bool) *waiter {
	var best *waiter
	var bestScore, bestServed uint64
	for f, ws := range q.waiting {
		if !keep(ws[0]) || !q.mayTake(f) {
			continue
		}
		w, s, served := ws[0], uint64(q.score(f)), q.lastServed(f)
		if best == nil || s < bestScore || (s == bestScore && (served < bestServed || served == bestServed && w.seq < best.seq)) {
			best, bestScore, bestServed = w, s, served
		}
	}
	return best
}

// lastServed is when f's tenant was last granted a seat (0: not while it was active).
func (q *Queue) lastServed(f Flow) uint64 {
	return max(q.served.ns[f.Namespace], q.served.caller[f.Caller])
}

// served remembers the last grant of each active namespace and caller.
type served struct {
	n          uint64
	ns, caller map[string]uint64
}

func (s *served) mark(f Flow) {
	s.n++
	s.caller[f.Caller] = s.n
	if f.Namespace != "" {
		s.ns[f.Namespace] = s.n
	}
}

// forget drops what is remembered of f's tenant once idle: memory bounded by the active tenants.
func (q *Queue) forget(f Flow) {
	ns, caller := q.held.ns[f.Namespace] > 0, q.held.caller[f.Caller] > 0
	for w := range q.waiting {
		ns = ns || w.Namespace == f.Namespace
		caller = caller || w.Caller == f.Caller
	}
	if !ns {
		delete(q.served.ns, f.Namespace)
	}
	if !caller {
		delete(q.served.caller, f.Caller)
	}
}

// grant gives w a seat (its own back, for a Requeue).
func (q *Queue) grant(w *waiter) {
	q.remove(w)
	seat := w.reuse
	switch {
	case seat == nil:
		seat = &Seat{q: q, flow: w.flow, cost: w.cost}
	case seat.state == stateGiven:
		q.seatless--
	}
	seat.state = stateHeld
	q.held.add(w.flow, 1)
	q.served.mark(w.flow)
	w.seat = seat
	close(w.ready)
}

// lendTo gives w a seat lent by a tenant above its share if w's is below its own.
func (q *Queue) lendTo(w *waiter) bool {
	if !q.opts.Lending || q.seatless >= q.slots {
		return false
	}
	shareNS, shareCaller := q.shares()
	if q.held.ns[w.flow.Namespace] >= shareNS || q.held.caller[w.flow.Caller] >= shareCaller {
		return false
	}
	for _, s := range q.lent {
		if q.held.ns[s.flow.Namespace] > shareNS || q.held.caller[s.flow.Caller] > shareCaller {
			q.unlend(s)
			s.state = stateGiven
			q.held.add(s.flow, -1)
			q.seatless++
			q.grant(w)
			return true
		}
	}
	return false
}

func (q *Queue) unlend(s *Seat) {
	for i, x := range q.lent {
		if x == s {
			q.lent = append(q.lent[:i], q.lent[i+1:]...)
			return
		}
	}
}

// FlowStats is what a flow has in the pool now.
type FlowStats struct {
	Flow
	Queued     int
	OldestWait time.Duration
	Held       int
}

// Stats lists the flows that hold or wait for a seat, by namespace then caller.
func (q *Queue) Stats() []FlowStats {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := wallclock.Or(q.opts.Clock).Now()
	by := map[Flow]*FlowStats{}
	for f, n := range q.held.flow {
		by[f] = &FlowStats{Flow: f, Held: n}
	}
	for f, ws := range q.waiting {
		st := by[f]
		if st == nil {
			st = &FlowStats{Flow: f}
			by[f] = st
		}
		st.Queued = len(ws)
		for _, w := range ws {
			st.OldestWait = max(st.OldestWait, now.Sub(w.since))
		}
	}
	out := make([]FlowStats, 0, len(by))
	for _, st := range by {
		out = append(out, *st)
	}
	slices.SortFunc(out, func(a, b FlowStats) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Caller, b.Caller))
	})
	return out
}
