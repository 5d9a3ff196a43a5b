package sweeper

import (
	"sync"
	"time"

	"github.com/async-helm/async-helm/pkg/release"
)

// sentLog is the leader's own record of its re-sends (the tenant may rewrite the annotations);
// a new leader starts empty (at most one re-send of each queued revision at a takeover).
type sentLog struct {
	mu sync.Mutex
	m  map[string]sentMark
}

type sentMark struct {
	n  int
	at time.Time
}

func sentKey(rev release.Revision) string {
	return rev.Namespace + "/" + rev.SecretName + "/" + string(rev.UID)
}

func (l *sentLog) record(rev release.Revision, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]sentMark{}
	}
	m := l.m[sentKey(rev)]
	l.m[sentKey(rev)] = sentMark{n: m.n + 1, at: now}
}

// overlay is revs as the leader sent them (at least as often and as late), and not
// dead-lettered within the wait of its own last re-send (a tenant's mark would skip it).
func (l *sentLog) overlay(revs []release.Revision, c Config, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, rev := range revs {
		m, ok := l.m[sentKey(rev)]
		if !ok {
			continue
		}
		revs[i].Sent = max(rev.Sent, m.n)
		if m.at.After(rev.SentAt) {
			revs[i].SentAt = m.at
		}
		if now.Sub(m.at) < c.redriveWait(m.n) {
			revs[i].DeadLettered = false
		}
	}
}

// forget drops the marks of revisions that are no longer pending.
func (l *sentLog) forget(revs []release.Revision) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.m) == 0 {
		return
	}
	live := make(map[string]bool, len(revs))
	for _, rev := range revs {
		live[sentKey(rev)] = true
	}
	for k := range l.m {
		if !live[k] {
			delete(l.m, k)
		}
	}
}
