package notifier

import (
	"sync"
	"time"

	"github.com/async-helm/async-helm/pkg/release"
)

// markMemory is how long the sweeper remembers an uninstall mark after it last saw it
// pending (at least twice QUEUE_DEADLINE): no mark of ours leaves pending and comes back,
// so one that does is a tenant's relabel, and keeps the clock it had.
const markMemory = 24 * time.Hour

// markKey names an uninstall mark by its seal's own domain (namespace, Secret name,
// request id): a tenant makes a new key only with a new accepted uninstall. A UID would
// let it restart the clock by deleting and re-creating the Secret.
type markKey struct{ namespace, secret, requestID string }

type markSeen struct{ first, last time.Time }

// markClock is when this sweeper first saw each sealed uninstall mark pending. An
// uninstalling revision's clock (Revision.Created) is Helm's modifiedAt label, which a
// tenant writes: moved forward now and then, it kept a queued mark, and its namespace's
// MAX_QUEUED share, past QUEUE_DEADLINE for ever. The sweeper's own first sight is not
// the tenant's to move. It is in memory: a restart or a new leader starts it again, once.
type markClock struct {
	mu   sync.Mutex
	seen map[markKey]markSeen
}

// start is rev's clock at now: a reservation's creation (set by the API server), an
// uninstall mark's modifiedAt label but never later than when this sweeper first saw the
// mark. Only sealed marks (tracked true) are remembered, so a tenant's hand-made ones,
// which count for nothing toward admission, cannot grow the memory.
func (c *markClock) start(rev release.Revision, tracked bool, now time.Time) time.Time {
	if rev.Status != release.StatusUninstalling || !tracked {
		return rev.Created
	}
	k := markKey{namespace: rev.Namespace, secret: rev.SecretName, requestID: rev.RequestID}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[markKey]markSeen{}
	}
	s, ok := c.seen[k]
	if !ok {
		s.first = now
	}
	s.last = now
	c.seen[k] = s
	if rev.Created.After(s.first) {
		return s.first
	}
	return rev.Created
}

// forget drops the marks last seen pending before cutoff.
func (c *markClock) forget(cutoff time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, s := range c.seen {
		if s.last.Before(cutoff) {
			delete(c.seen, k)
		}
	}
}

// markStart is rev's clock for the sweeper (markClock.start): with a key, only marks
// sealed for their request are remembered.
func (s *Service) markStart(rev release.Revision, now time.Time) time.Time {
	tracked := len(s.SigningKey) == 0 || release.SealedRevision(s.SigningKey, rev)
	return s.markClock.start(rev, tracked, now)
}

// forgetMarks drops the marks not seen pending for markMemory (at least twice
// QUEUE_DEADLINE), after a pass.
func (s *Service) forgetMarks(now time.Time) {
	s.markClock.forget(now.Add(-max(markMemory, 2*s.Sweep.QueueDeadline)))
}
