package sweeper

import (
	"slices"
	"sync"
	"time"

	"github.com/async-helm/async-helm/pkg/release"
)

// markMemory is how long the sweeper remembers a sealed pending revision after it last
// saw it pending (at least twice QUEUE_DEADLINE): no record of ours leaves pending and
// comes back, so one that does is a tenant's relabel or re-made Secret, and keeps the
// clock it had.
const markMemory = 24 * time.Hour

// maxMarkHistory bounds the revisions remembered that were not seen pending in the last
// pass (the history markMemory keeps). Every accepted request leaves one behind, and a
// tenant mints them at submit's accept rate: unbounded, a day of them was gigabytes in the
// leading notifier. Revisions pending now are never dropped. Past the bound each namespace
// keeps its newest history first (forget): what one namespace presents, or the whole
// service's traffic, never pushes out another namespace's newest keys. Only a revision
// made pending again after it was dropped gets a new clock, and to have its own dropped a
// tenant must present newer sealed revisions of its own namespace (each an accepted
// request), more than a fresh accepted request per held slot would cost it.
const maxMarkHistory = 1 << 16

// markKey names a sealed pending revision by its seal's own domain (namespace, Secret
// name, request id): a tenant makes a new key only with a new accepted request. A UID
// would let it restart the clock by deleting and re-creating the Secret.
type markKey struct{ namespace, secret, requestID string }

// markSeen is when a key was first and last seen pending, and in which pass last; read
// says its stored event was read once, and accepted is the acceptance time submit signed
// in it (zero: none verifiable).
type markSeen struct {
	first, last, accepted time.Time
	pass                  uint64
	read                  bool
}

// markClock is when this sweeper first saw each sealed revision pending, and when submit
// accepted it (markStart). A revision's
// clock (Revision.Created) is its Secret's creationTimestamp, or for an uninstall mark
// Helm's modifiedAt label: a tenant writes the label, and gets a new creationTimestamp by
// deleting the Secret and making it again with the same labels, seal and payload. Either,
// done now and then, kept a queued record, and its namespace's MAX_QUEUED share, past
// QUEUE_DEADLINE for ever. The sweeper's own first sight is not the tenant's to move, but it
// is in memory: a restart, a new leader or the history bound started it again. The signed
// acceptance time survives all three.
type markClock struct {
	mu   sync.Mutex
	seen map[markKey]markSeen
	// pass counts forget calls: an entry whose pass is older was not seen in the last one.
	pass uint64
}

// start is rev's clock at now: its Created (the API server's creationTimestamp, an
// uninstall mark's modifiedAt label) but never later than when this sweeper first saw it,
// nor than its signed acceptance time once read (accept).
// Only sealed revisions (tracked true) are remembered, so a tenant's hand-made ones,
// which count for nothing toward admission, cannot grow the memory.
func (c *markClock) start(rev release.Revision, tracked bool, now time.Time) time.Time {
	if !tracked {
		return rev.Created
	}
	s := c.edit(rev, now, func(s *markSeen) { s.last, s.pass = now, c.pass })
	clock := rev.Created
	if clock.After(s.first) {
		clock = s.first
	}
	if !s.accepted.IsZero() && clock.After(s.accepted) {
		clock = s.accepted
	}
	return clock
}

// unread says whether rev's stored event is still to be read (one GET per key: the
// index holds metadata only).
func (c *markClock) unread(rev release.Revision) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.seen[keyOf(rev)].read
}

// accept remembers rev's signed acceptance time (zero: none verifiable), seen at now.
func (c *markClock) accept(rev release.Revision, at, now time.Time) {
	c.edit(rev, now, func(s *markSeen) { s.accepted, s.read = at, true })
}

// edit changes rev's entry under the lock (a new one first seen at now) and returns it.
func (c *markClock) edit(rev release.Revision, now time.Time, change func(*markSeen)) markSeen {
	k := keyOf(rev)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[markKey]markSeen{}
	}
	s, ok := c.seen[k]
	if !ok {
		s.first, s.last, s.pass = now, now, c.pass
	}
	change(&s)
	c.seen[k] = s
	return s
}

func keyOf(rev release.Revision) markKey {
	return markKey{namespace: rev.Namespace, secret: rev.SecretName, requestID: rev.RequestID}
}

// forget ends a pass: it drops the revisions last seen pending before cutoff and, past
// maxMarkHistory of those not seen in this pass, the rest of historyKept's order.
func (c *markClock) forget(cutoff time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var history []markKey
	for k, s := range c.seen {
		switch {
		case s.last.Before(cutoff):
			delete(c.seen, k)
		case s.pass != c.pass:
			history = append(history, k)
		}
	}
	c.pass++
	if len(history) <= maxMarkHistory {
		return
	}
	for _, k := range c.historyKept(history)[maxMarkHistory:] {
		delete(c.seen, k)
	}
}

// historyKept orders history from the first kept to the first dropped: every namespace's
// newest key, then every namespace's second newest, and so on (the newest first within a
// round). The bound was one queue of the whole service, the oldest seen out first: the
// other namespaces' accepted requests pushed out a tenant's key for free (at a few hundred
// requests a second, within minutes), and a tenant that took its re-made reservation out
// of pending until then had it back with a new clock, holding its slot past QUEUE_DEADLINE
// with the same few seals for ever. Now a key goes only after more than maxMarkHistory
// keys of its rank or lower: the tenant's own newer ones, or as many namespaces'.
func (c *markClock) historyKept(history []markKey) []markKey {
	type entry struct {
		key  markKey
		last time.Time
		rank int
	}
	newest := func(a, b entry) int { return b.last.Compare(a.last) }
	byNamespace := map[string][]entry{}
	for _, k := range history {
		byNamespace[k.namespace] = append(byNamespace[k.namespace], entry{key: k, last: c.seen[k].last})
	}
	all := make([]entry, 0, len(history))
	for _, es := range byNamespace {
		slices.SortFunc(es, newest)
		for i := range es {
			es[i].rank = i
		}
		all = append(all, es...)
	}
	slices.SortFunc(all, func(a, b entry) int {
		if a.rank != b.rank {
			return a.rank - b.rank
		}
		return newest(a, b)
	})
	for i, e := range all {
		history[i] = e.key
	}
	return history
}
