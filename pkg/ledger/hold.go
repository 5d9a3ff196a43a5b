package ledger

import "sync"

// holds are requests admitted on this replica whose entry is not written yet (admission to
// the hand-over takes a chart fetch, a values check and the reservation): they count with
// the entries, so that requests in flight cannot all pass the same check.
type holds struct {
	total   int
	ns      map[string]int
	callers map[string]int
}

func (h *holds) add(ns, caller string, d int) {
	if h.ns == nil {
		h.ns, h.callers = map[string]int{}, map[string]int{}
	}
	h.total += d
	bump(h.ns, ns, d)
	if caller != "" {
		bump(h.callers, caller, d)
	}
}

func bump(m map[string]int, k string, d int) {
	if m[k] += d; m[k] <= 0 {
		delete(m, k)
	}
}

// Admit decides a request of caller (CallerKey) in namespace and, when admitted, holds its
// place until release is called (once its entry is added, or the request failed). The
// decision and the hold are one step: concurrent requests see each other's holds.
func (b *Book) Admit(namespace, caller string, l Limits) (release func(), r *Refusal) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r := Decide(b.counts(namespace, caller), l); r != nil {
		return nil, r
	}
	b.held.add(namespace, caller, 1)
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			b.held.add(namespace, caller, -1)
			b.mu.Unlock()
		})
	}, nil
}
