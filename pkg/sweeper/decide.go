package sweeper

import (
	"fmt"
	"sort"
	"time"

	"github.com/async-helm/async-helm/pkg/release"
)

// What the sweeper does to a revision is decided here by pure functions; apply writes.

type action int

const (
	leave  action = iota // nothing now: waiting for a slot, alive, or given its time
	read                 // read its record and decide on it (decideRecord)
	fail                 // fail it, with the reason
	resend               // send its stored event again
)

// verdict is the action and, to fail, the reason; to resend, the time the claim records.
type verdict struct {
	action action
	reason string
	at     time.Time
}

// maxClockSkew is how far ahead (another pod's clock) a mark may be dated before it is a forgery.
const maxClockSkew = 5 * time.Minute

// due is what a sweep gathered before it read the record: now, the revision's clock, its
// last send, and its last sign of life (since, alive: read only when the clocks do not decide).
type due struct {
	now, start, since, lastSent time.Time
	alive, overdue              bool
}

// futureMark: an uninstall's clock is Helm's modifiedAt, a tenant's to write: far ahead is forged.
func futureMark(rev release.Revision, now time.Time) (verdict, bool) {
	if !rev.Created.After(now.Add(maxClockSkew)) {
		return verdict{}, false
	}
	return verdict{action: fail, reason: fmt.Sprintf("Release %q failed: revision %d is marked at %s, in the future (marked failed by the notifier)",
		rev.Name, rev.Version, rev.Created.UTC().Format(time.RFC3339))}, true
}

// clocked is due at now for a revision whose clock starts at start.
func (c Config) clocked(rev release.Revision, now, start time.Time) due {
	d := due{now: now, start: start, lastSent: start}
	if rev.SentAt.After(d.lastSent) {
		d.lastSent = rev.SentAt
	}
	d.overdue = now.Sub(start) >= c.QueueDeadline
	return d
}

// maxRedriveDoublings caps redriveWait at 32 x RedriveAfter (64 min at the default 2 min).
const maxRedriveDoublings = 5

// waiting: a queued revision within its deadline, not dead-lettered, sent less than its
// redriveWait ago, waits for a slot; nothing else is read (most queued revisions).
func (c Config) waiting(rev release.Revision, d due) bool {
	return rev.Queued && !d.overdue && !rev.DeadLettered && d.now.Sub(d.lastSent) < c.redriveWait(rev.Sent)
}

// redriveWait is RedriveAfter doubled per re-send: a delivery may wait most of an hour in a fair
// queue and each copy takes a place, so copies grow with the log of the wait (dead letter: now).
func (c Config) redriveWait(n int) time.Duration {
	n = min(max(n, 0), maxRedriveDoublings)
	return c.RedriveAfter << n
}

// deferred: past MaxRedrivesPerPass re-sends (two reads and a patch each), a queued revision
// within its deadline waits for a later pass, unread; started or overdue ones never do.
func (c Config) deferred(rev release.Revision, d due, redriven int) bool {
	return c.MaxRedrivesPerPass > 0 && redriven >= c.MaxRedrivesPerPass && rev.Queued && !d.overdue
}

// resendDue is when a queued revision's event is due to be sent again (waiting's clock).
func (c Config) resendDue(rev release.Revision) time.Time {
	last := rev.Created
	if rev.SentAt.After(last) {
		last = rev.SentAt
	}
	if rev.DeadLettered {
		return last
	}
	return last.Add(c.redriveWait(rev.Sent))
}

// longestDueFirst orders a pass with bounded re-sends one namespace at a time in turn, each
// namespace's earliest due first: a tenant's backlog takes one turn a round, not the pass.
func (c Config) longestDueFirst(revs []release.Revision) {
	if c.MaxRedrivesPerPass <= 0 {
		return
	}
	sort.SliceStable(revs, func(i, j int) bool { return c.resendDue(revs[i]).Before(c.resendDue(revs[j])) })
	type ranked struct {
		turn int
		rev  release.Revision
	}
	order, turns := make([]ranked, len(revs)), map[string]int{}
	for i, r := range revs {
		order[i] = ranked{turns[r.Namespace], r}
		turns[r.Namespace]++
	}
	sort.SliceStable(order, func(i, j int) bool { return order[i].turn < order[j].turn })
	for i := range order {
		revs[i] = order[i].rev
	}
}

// decideLife: alive, or started within Grace of its executor's last sign, is left; else read.
// A live Lease (the tenant can keep it alive) does not hold off QueueDeadline while queued.
func (c Config) decideLife(rev release.Revision, d due) verdict {
	if d.alive && !(rev.Queued && d.overdue) {
		return verdict{action: leave}
	}
	if !rev.Queued && d.now.Sub(d.since) < c.Grace {
		return verdict{action: leave}
	}
	return verdict{action: read}
}

// record is what the sweeper read of a due revision's record; refusal is why its event may
// not be sent again ("": it may; checked only when the rest does not decide, checkStored).
type record struct {
	undecodable bool
	hasEvent    bool
	refusal     string
}

// decideRecord: undecodable, overdue, no event or a refused one: failed; re-sent less than Grace
// ago: left; else re-sent. Unchecked, read asks for checkStored first.
func (c Config) decideRecord(rev release.Revision, r record, d due, checked bool) verdict {
	switch {
	case r.undecodable:
		return verdict{action: fail, reason: fmt.Sprintf("Release %q failed: revision %d cannot run: its release record does not decode (marked failed by the notifier)",
			rev.Name, rev.Version)}
	case d.overdue || !r.hasEvent:
		return verdict{action: fail, reason: stuckReason(rev, d)}
	case !checked:
		return verdict{action: read}
	case r.refusal != "":
		return verdict{action: fail, reason: fmt.Sprintf("Release %q failed: revision %d was not sent again: %s (marked failed by the notifier)",
			rev.Name, rev.Version, r.refusal)}
	case !rev.Queued && !rev.DeadLettered && d.now.Sub(d.lastSent) < c.Grace:
		return verdict{action: leave} // re-sent recently; give that delivery its time
	}
	return verdict{action: resend, at: d.now}
}

// stuckReason says why a pending revision is failed.
func stuckReason(rev release.Revision, d due) string {
	if !d.overdue {
		return fmt.Sprintf("Release %q failed: revision %d has no live executor for %s and no stored request to send again (marked failed by the notifier)",
			rev.Name, rev.Version, d.now.Sub(d.since).Round(time.Second))
	}
	what := fmt.Sprintf("its executor was lost (no live lease for %s)", d.now.Sub(d.since).Round(time.Second))
	if rev.Queued {
		what = "it never started: no executor took it"
	}
	return fmt.Sprintf("Release %q failed: revision %d was pending for %s and %s; its request was sent %d more times (marked failed by the notifier)",
		rev.Name, rev.Version, d.now.Sub(d.start).Round(time.Second), what, rev.Sent)
}
