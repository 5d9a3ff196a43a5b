package sweeper

import (
	"strings"
	"testing"
	"time"

	"github.com/async-helm/async-helm/pkg/release"
)

// cfg is the tests' sweeper configuration (newEnv's).
var cfg = Config{RedriveAfter: 2 * time.Minute, Grace: time.Minute, QueueDeadline: time.Hour}

func pending(queued bool) release.Revision {
	return release.Revision{Name: "web", Version: 1, Status: "pending-install", Ours: true, Queued: queued, Created: t0}
}

// A mark dated more than maxClockSkew ahead is a forgery: failed, with the date it carries.
func TestFutureMark(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ahead  time.Duration
		forged bool
	}{
		{"now", 0, false},
		{"within the skew", maxClockSkew, false},
		{"past the skew", maxClockSkew + time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rev := pending(true)
			rev.Created = t0.Add(tc.ahead)
			v, forged := futureMark(rev, t0)
			if forged != tc.forged || (forged && (v.action != fail || !strings.Contains(v.reason, "in the future"))) {
				t.Errorf("futureMark: %+v, %v", v, forged)
			}
		})
	}
}

// Before anything is read: a queued revision within its deadline and its redrive wait is
// only waiting for a slot; the last re-send restarts the wait, a dead letter ends it.
func TestWaiting(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rev     func(r *release.Revision)
		age     time.Duration // since the clock's start
		waiting bool
	}{
		{"queued, just reserved", func(*release.Revision) {}, time.Minute, true},
		{"queued, due for a re-send", func(*release.Revision) {}, 2 * time.Minute, false},
		{"queued, re-sent a minute ago", func(r *release.Revision) { r.SentAt = t0.Add(9 * time.Minute) }, 10 * time.Minute, true},
		{"queued, re-sent once, 3 minutes ago", func(r *release.Revision) { r.Sent, r.SentAt = 1, t0.Add(2*time.Minute) }, 5 * time.Minute, true},
		{"queued, re-sent once, 4 minutes ago", func(r *release.Revision) { r.Sent, r.SentAt = 1, t0.Add(2*time.Minute) }, 6 * time.Minute, false},
		{"queued, re-sent 3 times, 15 minutes ago", func(r *release.Revision) { r.Sent, r.SentAt = 3, t0.Add(10*time.Minute) }, 25 * time.Minute, true},
		{"queued, re-sent 3 times, 16 minutes ago", func(r *release.Revision) { r.Sent, r.SentAt = 3, t0.Add(10*time.Minute) }, 26 * time.Minute, false},
		{"queued, re-sent twice, dead-lettered", func(r *release.Revision) { r.Sent, r.SentAt, r.DeadLettered = 2, t0, true }, time.Second, false},
		{"queued, dead-lettered", func(r *release.Revision) { r.DeadLettered = true }, time.Second, false},
		{"queued, past the deadline though re-sent", func(r *release.Revision) { r.SentAt = t0.Add(time.Hour) }, time.Hour, false},
		{"started", func(r *release.Revision) { r.Queued = false }, time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rev := pending(true)
			tc.rev(&rev)
			if got := cfg.waiting(rev, cfg.clocked(rev, t0.Add(tc.age), t0)); got != tc.waiting {
				t.Errorf("waiting: %v, want %v", got, tc.waiting)
			}
		})
	}
}

// Each re-send doubles the wait before the next, up to 32 x RedriveAfter.
func TestRedriveWait(t *testing.T) {
	for sent, want := range map[int]time.Duration{-1: 2 * time.Minute, 0: 2 * time.Minute, 1: 4 * time.Minute,
		3: 16 * time.Minute, 5: 64 * time.Minute, 9: 64 * time.Minute} {
		if got := cfg.redriveWait(sent); got != want {
			t.Errorf("redriveWait(%d) = %s, want %s", sent, got, want)
		}
	}
}

// Once its sign of life is known: alive is left (but a queued revision past its deadline,
// whose Lease a tenant can keep alive); a started one is given Grace after its last sign.
func TestDecideLife(t *testing.T) {
	for _, tc := range []struct {
		name   string
		queued bool
		age    time.Duration // since the clock's start
		alive  bool
		silent time.Duration // since the last sign of life
		want   action
	}{
		{"queued within the deadline, a live Lease", true, 10 * time.Minute, true, 0, leave},
		{"queued past the deadline, a live Lease", true, time.Hour, true, 0, read},
		{"queued, no Lease", true, 10 * time.Minute, false, 10 * time.Minute, read},
		{"started, executor alive past the deadline", false, 2 * time.Hour, true, 0, leave},
		{"started, lease lapsed within grace", false, 10 * time.Minute, false, 50 * time.Second, leave},
		{"started, lease lapsed past grace", false, 10 * time.Minute, false, time.Minute, read},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rev := pending(tc.queued)
			now := t0.Add(tc.age)
			d := cfg.clocked(rev, now, t0)
			d.alive, d.since = tc.alive, now.Add(-tc.silent)
			if got := cfg.decideLife(rev, d).action; got != tc.want {
				t.Errorf("decideLife: %v, want %v", got, tc.want)
			}
		})
	}
}

// Past a pass's bound on re-sends, a queued revision within its deadline waits for the
// next pass; a started one, or one past its deadline, is never deferred.
func TestDeferred(t *testing.T) {
	bounded := cfg
	bounded.MaxRedrivesPerPass = 2
	for _, tc := range []struct {
		name     string
		c        Config
		queued   bool
		age      time.Duration
		redriven int
		deferred bool
	}{
		{"queued, budget left", bounded, true, 3 * time.Minute, 1, false},
		{"queued, budget spent", bounded, true, 3 * time.Minute, 2, true},
		{"queued past the deadline, budget spent", bounded, true, time.Hour, 2, false},
		{"started, budget spent", bounded, false, 3 * time.Minute, 5, false},
		{"no bound", cfg, true, 3 * time.Minute, 1000, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rev := pending(tc.queued)
			if got := tc.c.deferred(rev, tc.c.clocked(rev, t0.Add(tc.age), t0), tc.redriven); got != tc.deferred {
				t.Errorf("deferred: %v, want %v", got, tc.deferred)
			}
		})
	}
}

// With re-sends bounded, a pass takes the revisions in the order their re-send fell due: a
// dead letter at once, then each at its doubled wait after it was last sent.
func TestLongestDueFirst(t *testing.T) {
	bounded := cfg
	bounded.MaxRedrivesPerPass = 1
	rev := func(name string, set func(r *release.Revision)) release.Revision {
		r := pending(true)
		r.Name = name
		set(&r)
		return r
	}
	revs := []release.Revision{
		rev("sent-twice", func(r *release.Revision) { r.Sent, r.SentAt = 2, t0.Add(time.Minute) }),                // due t0+9m
		rev("reserved-late", func(r *release.Revision) { r.Created = t0.Add(5 * time.Minute) }),                   // due t0+7m
		rev("dead-letter", func(r *release.Revision) { r.DeadLettered, r.Created = true, t0.Add(6*time.Minute) }), // due t0+6m, not t0+8m
		rev("reserved-first", func(*release.Revision) {}),                                                         // due t0+2m
	}
	bounded.longestDueFirst(revs)
	var got []string
	for _, r := range revs {
		got = append(got, r.Name)
	}
	if want := "reserved-first dead-letter reserved-late sent-twice"; strings.Join(got, " ") != want {
		t.Errorf("order %v, want %s", got, want)
	}
}
