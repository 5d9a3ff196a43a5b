package ledger

import (
	"cmp"
	"slices"
	"time"
)

// key orders a tenant's queue: by acceptance, then request id, the same order in every
// replica of submit.
type key struct {
	at time.Time
	id string
}

func orderKey(e Entry) key { return key{at: e.At, id: e.RequestID} }

func compareKeys(a, b key) int {
	if c := a.at.Compare(b.at); c != 0 {
		return c
	}
	return cmp.Compare(a.id, b.id)
}

// queueOrder keeps one tenant's entries sorted by acceptance: a position is a binary
// search; a burst appends at the end and its starts remove at the front.
type queueOrder struct {
	sorted []key
	secret map[string]key // secret name -> its entry (the latest accepted)
}

func (o *queueOrder) insert(e Entry) {
	k := orderKey(e)
	if i, found := slices.BinarySearchFunc(o.sorted, k, compareKeys); !found {
		o.sorted = slices.Insert(o.sorted, i, k)
	}
	if o.secret == nil {
		o.secret = map[string]key{}
	}
	if cur, ok := o.secret[e.SecretName]; !ok || compareKeys(cur, k) < 0 {
		o.secret[e.SecretName] = k
	}
}

func (o *queueOrder) remove(e Entry) {
	k := orderKey(e)
	if i, found := slices.BinarySearchFunc(o.sorted, k, compareKeys); found {
		o.sorted = slices.Delete(o.sorted, i, i+1)
	}
	if cur, ok := o.secret[e.SecretName]; ok && compareKeys(cur, k) == 0 {
		delete(o.secret, e.SecretName)
	}
}

// position is k's place, 1 for the oldest (0 when absent).
func (o *queueOrder) position(k key) int {
	if i, found := slices.BinarySearchFunc(o.sorted, k, compareKeys); found {
		return i + 1
	}
	return 0
}

// drainWindow is how many recent starts a tenant's drain rate is measured over.
const drainWindow = 16

// drainRate keeps the times of a tenant's last starts (its entries consumed).
type drainRate struct {
	at [drainWindow]time.Time
	n  int // how many were recorded (the ring holds the last drainWindow)
}

func (d *drainRate) add(t time.Time) {
	d.at[d.n%drainWindow] = t
	d.n++
}

func (d *drainRate) last() time.Time { return d.at[(d.n-1)%drainWindow] }

func (d *drainRate) first() time.Time {
	if d.n < drainWindow {
		return d.at[0]
	}
	return d.at[d.n%drainWindow]
}

// perStart is the mean time between the tenant's recent starts; ok is false with fewer
// than two, or all in one instant.
func (d *drainRate) perStart() (time.Duration, bool) {
	k := min(d.n, drainWindow)
	if k < 2 {
		return 0, false
	}
	span := d.last().Sub(d.first())
	if span <= 0 {
		return 0, false
	}
	return span / time.Duration(k-1), true
}

// old: the tenant's last start is too long ago for its rate to say anything.
func (d *drainRate) old(now time.Time) bool { return d.n == 0 || now.Sub(d.last()) > time.Hour }

// Position is where an accepted request stands in its namespace's queue.
type Position struct {
	// Position is 1 for the namespace's request accepted first of those not started.
	Position int
	// Total is how many of the namespace's requests wait.
	Total int
	// AcceptedAt is when the request was accepted.
	AcceptedAt time.Time
	// ExpectedStart is when it should start at its namespace's recent rate of starts;
	// zero when there is no rate yet.
	ExpectedStart time.Time
}

// QueuePosition is the place of the request whose revision is secretName of namespace;
// ok is false when none waits for it.
func (b *Book) QueuePosition(namespace, secretName string) (Position, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.ns[namespace]
	if !ok {
		return Position{}, false
	}
	k, ok := t.order.secret[secretName]
	if !ok {
		return Position{}, false
	}
	p := Position{Position: t.order.position(k), Total: len(t.order.sorted), AcceptedAt: k.at}
	if p.Position == 0 {
		return Position{}, false
	}
	if per, ok := t.drained.perStart(); ok {
		start := t.drained.last().Add(per * time.Duration(p.Position))
		if now := b.now(); start.Before(now) {
			start = now
		}
		p.ExpectedStart = start
	}
	return p, true
}

// Pending is the request accepted last for the revision secretName of namespace and not
// consumed yet: what a cancel binds when the Secret no longer names it (a tenant may strip
// the stored event and the request-id label, not this).
func (b *Book) Pending(namespace, secretName string) (requestID string, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.ns[namespace]
	if !ok {
		return "", false
	}
	k, ok := t.order.secret[secretName]
	return k.id, ok
}
