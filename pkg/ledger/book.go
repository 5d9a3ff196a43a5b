package ledger

import (
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/async-helm/async-helm/pkg/wallclock"
)

// Book counts the ledger in memory, fed by the watch of entries and consumed records:
// admission in O(1), a queue position in O(log n). An entry counts from when it is seen
// until its consumed record is seen, it is deleted, or it is older than TTL; a consumed
// record counts as its tenant's retained request until pruned or older than Retain.
type Book struct {
	// TTL bounds how long an entry counts (0: for ever).
	TTL time.Duration
	// Retain bounds how long a consumed record counts (0: until it is pruned): the
	// sweeper's prune age, EVENT_MAX_AGE + 1 h.
	Retain time.Duration
	// Clock is the time of TTL and of the drain rates (nil: the wall clock).
	Clock clock.PassiveClock

	mu       sync.Mutex
	entries  map[string]*item   // request hash -> entry seen
	leases   map[string]*lease  // Lease name -> the entries it holds
	retained retained           // consumed records, per request hash and per tenant
	ns       map[string]*tenant // per namespace: its queue and drain rate
	callers  map[string]int     // per caller key ("" not counted): entries counting
	total    int
	active   int      // namespaces with entries counting
	stale    []string // entry names to delete (consumed or expired), for the cleaner
	held     holds    // admitted here, entry not added yet (hold.go)
}

type item struct {
	e       Entry
	lease   string // the Lease holding it
	counted bool
	cleared bool // consumed or expired: never counts again
}

// lease is one Lease of the ledger: one entry, or a group commit's batch. It is deleted
// once none of its entries counts.
type lease struct {
	hashes []string
	left   int // entries not cleared
}

type tenant struct {
	order   queueOrder
	drained drainRate
}

// NewBook builds an empty book.
func NewBook(ttl time.Duration, c clock.PassiveClock) *Book {
	return &Book{TTL: ttl, Clock: c, entries: map[string]*item{}, leases: map[string]*lease{},
		retained: newRetained(), ns: map[string]*tenant{}, callers: map[string]int{}}
}

func (b *Book) now() time.Time { return wallclock.Or(b.Clock).Now() }

// Added records an entry (seen by the watch, or just written by this replica).
func (b *Book) Added(e Entry) { b.AddedBatch(Name(e.RequestID), []Entry{e}) }

// AddedBatch records the entries of Lease name (a group commit's batch).
func (b *Book) AddedBatch(name string, es []Entry) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.leases[name]; ok {
		return // entries are never rewritten: the first sight stands
	}
	l := &lease{}
	b.leases[name] = l
	now := b.now()
	for _, e := range es {
		h, _ := hashOf(Name(e.RequestID))
		if _, ok := b.entries[h]; ok {
			continue // in another Lease already: that one counts it
		}
		it := &item{e: e, lease: name}
		b.entries[h] = it
		l.hashes = append(l.hashes, h)
		l.left++
		b.add(h, it, now)
	}
	if len(l.hashes) == 0 {
		b.stale = append(b.stale, name) // nothing of its own to count
	}
}

// add counts a new entry unless it is consumed or expired already.
func (b *Book) add(h string, it *item, now time.Time) {
	e := it.e
	if b.retained.seen(h, e) || b.expired(e, now) {
		b.clear(it, false)
		return
	}
	it.counted = true
	b.total++
	if e.Caller != "" {
		b.callers[e.Caller]++
	}
	t := b.tenant(e.Namespace)
	if len(t.order.sorted) == 0 {
		b.active++
	}
	t.order.insert(e)
}

// Removed forgets the entries of Lease name (deleted).
func (b *Book) Removed(name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	l, ok := b.leases[name]
	if !ok {
		return
	}
	for _, h := range l.hashes {
		if it, ok := b.entries[h]; ok && it.lease == name {
			b.uncount(it)
			delete(b.entries, h)
		}
	}
	delete(b.leases, name)
}

// Consumed is ConsumedAs with nothing read from the record.
func (b *Book) Consumed(name string) { b.ConsumedAs(name, Consumption{}) }

// ConsumedAs records that the request of consumed record name was consumed: its entry, if
// any, stops counting and is deleted, and the record counts for its tenant as retained.
func (b *Book) ConsumedAs(name string, c Consumption) {
	h, ok := hashOf(name)
	if !ok {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	it := b.entries[h]
	b.retained.consumed(h, c, it, b.now(), b.Retain)
	if it != nil {
		b.clear(it, true)
	}
}

// Pruned forgets a consumed record that was deleted (consumed.Store.Prune).
func (b *Book) Pruned(name string) {
	if h, ok := hashOf(name); ok {
		b.mu.Lock()
		b.retained.pruned(h)
		b.mu.Unlock()
	}
}

// clear stops it counting for good and queues its Lease for deletion once none of its
// entries counts; drained says it left its queue consumed (its namespace's drain rate).
func (b *Book) clear(it *item, drained bool) {
	if it.cleared {
		return
	}
	if drained && it.counted {
		b.tenant(it.e.Namespace).drained.add(b.now())
	}
	b.uncount(it)
	it.cleared = true
	if l := b.leases[it.lease]; l != nil {
		if l.left--; l.left == 0 {
			b.stale = append(b.stale, it.lease)
		}
	}
}

func (b *Book) uncount(it *item) {
	if !it.counted {
		return
	}
	it.counted = false
	b.total--
	if c := it.e.Caller; c != "" {
		if b.callers[c]--; b.callers[c] <= 0 {
			delete(b.callers, c)
		}
	}
	t := b.ns[it.e.Namespace]
	t.order.remove(it.e)
	if len(t.order.sorted) == 0 {
		b.active--
	}
}

func (b *Book) tenant(ns string) *tenant {
	t, ok := b.ns[ns]
	if !ok {
		t = &tenant{}
		b.ns[ns] = t
	}
	return t
}

func (b *Book) expired(e Entry, now time.Time) bool {
	return b.TTL > 0 && now.Sub(e.At) > b.TTL
}

// Expire stops counting the entries older than TTL and returns the names of the Leases
// to delete (consumed or expired), taking them from the book.
func (b *Book) Expire() []string {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, it := range b.entries {
		if !it.cleared && b.expired(it.e, now) {
			b.clear(it, false)
		}
	}
	b.retained.expire(now, b.Retain)
	for ns, t := range b.ns {
		if len(t.order.sorted) == 0 && t.drained.old(now) {
			delete(b.ns, ns)
		}
	}
	stale := b.stale
	b.stale = nil
	return stale
}

// Counts is what Decide needs for a request of caller (CallerKey) in namespace, the
// requests admitted here and not yet added included.
func (b *Book) Counts(namespace, caller string) Counts {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.counts(namespace, caller)
}

func (b *Book) counts(namespace, caller string) Counts {
	c := Counts{Total: b.total + b.held.total, Namespaces: b.active, Callers: len(b.callers),
		Retained: b.retained.tally(namespace, caller)}
	if t, ok := b.ns[namespace]; ok && len(t.order.sorted) > 0 {
		c.Namespace = len(t.order.sorted)
	} else {
		c.Namespaces++
	}
	c.Namespace += b.held.ns[namespace]
	if caller != "" {
		if c.Caller = b.callers[caller]; c.Caller == 0 {
			c.Callers++
		}
		c.Caller += b.held.callers[caller]
	}
	return c
}

// retry queues the deletion of Lease name again (a delete that failed).
func (b *Book) retry(name string) {
	b.mu.Lock()
	b.stale = append(b.stale, name)
	b.mu.Unlock()
}

// NamespaceGone stops counting the entries of a deleted namespace: their work can never
// run (its reservations went with it), and the sweeper fails nothing there. Its retained
// records stop counting too: it makes no more requests (its callers' counts keep them).
func (b *Book) NamespaceGone(ns string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, it := range b.entries {
		if it.e.Namespace == ns {
			b.clear(it, false)
		}
	}
	b.retained.namespaceGone(ns)
}
