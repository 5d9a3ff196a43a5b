package ledger

import "time"

// Consumption is what the Book reads of a consumed record: its request's tenant namespace
// and when it was consumed (zero: the entry's namespace, the time it is seen).
type Consumption struct {
	Namespace string
	At        time.Time
}

// Tally is a count per tenant, as Decide reads it: in all, the requesting namespace's and
// caller's, and how many namespaces and callers hold some (the requesting ones included).
type Tally struct {
	Total, Namespace, Caller, Namespaces, Callers int
}

// retained counts the consumed records the Book watches, per tenant, while they are kept
// (docs/design.md, "Retained requests"): what a tenant made over their retention, whether
// its requests ran, were cancelled or were not accepted.
type retained struct {
	by      map[string]*record // request hash -> its consumed record
	ns      map[string]int     // per tenant namespace: records counting
	callers map[string]int     // per caller key: records counting
	total   int
}

// record is one consumed record: it pairs with its entry by request hash, and counts for
// its tenant until it is pruned or older than the Book's Retain.
type record struct {
	ns, caller string
	at         time.Time
	counted    bool
}

func newRetained() retained {
	return retained{by: map[string]*record{}, ns: map[string]int{}, callers: map[string]int{}}
}

// consumed counts the consumed record of request hash h for its entry's tenant when known,
// unless it is past retain already; seen again (an update), it changes nothing.
func (r *retained) consumed(h string, c Consumption, entry *item, now time.Time, retain time.Duration) {
	if _, ok := r.by[h]; ok {
		return
	}
	rec := &record{ns: c.Namespace, at: c.At}
	if rec.at.IsZero() {
		rec.at = now
	}
	if entry != nil {
		rec.attribute(entry.e)
	}
	r.by[h] = rec
	if !past(rec.at, now, retain) {
		rec.counted = true
		r.count(rec, 1)
	}
}

// seen says whether request hash h has a consumed record, and attributes the record to
// entry e's tenant (the entry seen after its record: a replica's start).
func (r *retained) seen(h string, e Entry) bool {
	rec, ok := r.by[h]
	if !ok {
		return false
	}
	if rec.counted {
		r.count(rec, -1)
	}
	rec.attribute(e)
	if rec.counted {
		r.count(rec, 1)
	}
	return true
}

func (rec *record) attribute(e Entry) {
	if rec.ns == "" {
		rec.ns = e.Namespace
	}
	if rec.caller == "" {
		rec.caller = e.Caller
	}
}

// pruned forgets the consumed record of request hash h (deleted).
func (r *retained) pruned(h string) {
	rec, ok := r.by[h]
	if !ok {
		return
	}
	if rec.counted {
		r.count(rec, -1)
	}
	delete(r.by, h)
}

// expire stops counting the records older than retain; they still pair with their
// entries until pruned.
func (r *retained) expire(now time.Time, retain time.Duration) {
	for _, rec := range r.by {
		if rec.counted && past(rec.at, now, retain) {
			rec.counted = false
			r.count(rec, -1)
		}
	}
}

// namespaceGone stops counting the records of namespace ns, deleted, for it: one whose
// caller is known still counts for that caller (deleting a namespace does not clear what
// its callers made), the others stop counting.
func (r *retained) namespaceGone(ns string) {
	if r.ns[ns] == 0 {
		return
	}
	for _, rec := range r.by {
		if !rec.counted || rec.ns != ns {
			continue
		}
		r.count(rec, -1)
		rec.ns = ""
		if rec.counted = rec.caller != ""; rec.counted {
			r.count(rec, 1)
		}
	}
}

func (r *retained) count(rec *record, d int) {
	r.total += d
	if rec.ns != "" {
		bump(r.ns, rec.ns, d)
	}
	if rec.caller != "" {
		bump(r.callers, rec.caller, d)
	}
}

// tally is what Decide needs of the retained records for a request of caller in namespace.
func (r *retained) tally(namespace, caller string) Tally {
	t := Tally{Total: r.total, Namespace: r.ns[namespace], Namespaces: len(r.ns), Callers: len(r.callers)}
	if t.Namespace == 0 {
		t.Namespaces++
	}
	if caller != "" {
		if t.Caller = r.callers[caller]; t.Caller == 0 {
			t.Callers++
		}
	}
	return t
}

// past says whether a record consumed at is older than retain (0: it counts until pruned).
func past(at, now time.Time, retain time.Duration) bool {
	return retain > 0 && now.Sub(at) > retain
}
