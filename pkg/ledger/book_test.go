package ledger

import (
	"fmt"
	"slices"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/async-helm/async-helm/pkg/release/consumed"
)

var t0 = time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)

func entry(id, ns, caller string, at int) Entry {
	return Entry{RequestID: id, Namespace: ns, Caller: caller, SecretName: "sh.helm.release.v1." + id + ".v1",
		At: t0.Add(time.Duration(at) * time.Second)}
}

// step is one event the watch or this replica gives the book.
type step struct {
	add      *Entry
	consumed string // request id whose consumed record was seen
	removed  string // request id whose entry was deleted
	pruned   string // request id whose consumed record was pruned
	gone     string // namespace deleted
	advance  time.Duration
}

func (s step) apply(b *Book, c *testingclock.FakeClock) {
	switch {
	case s.add != nil:
		b.Added(*s.add)
	case s.consumed != "":
		b.Consumed(consumed.LeaseName(s.consumed))
	case s.removed != "":
		b.Removed(Name(s.removed))
	case s.pruned != "":
		b.Pruned(consumed.LeaseName(s.pruned))
	case s.gone != "":
		b.NamespaceGone(s.gone)
	}
	c.Step(s.advance)
}

func add(e Entry) step { return step{add: &e} }

func TestBookCounts(t *testing.T) {
	a1, a2 := entry("r1", "a1", "a", 0), entry("r2", "a2", "a", 1)
	b1 := entry("r3", "b1", "b", 2)
	anon := entry("r4", "b1", "", 3)
	for _, tc := range []struct {
		name   string
		steps  []step
		ns     string
		caller string
		want   Counts
		stale  []string
	}{
		{"empty: the requester is one tenant", nil, "x", "c", Counts{Namespaces: 1, Callers: 1}, nil},
		{"one user, two namespaces", []step{add(a1), add(a2)}, "a1", "a", Counts{Total: 2, Namespace: 1, Caller: 2, Namespaces: 2, Callers: 1}, nil},
		{"a newcomer is counted as one more", []step{add(a1), add(a2)}, "b1", "b", Counts{Total: 2, Namespaces: 3, Callers: 2}, nil},
		{"no caller is no caller tenant", []step{add(a1), add(anon)}, "b1", "", Counts{Total: 2, Namespace: 1, Namespaces: 2, Callers: 1}, nil},
		{"an entry seen twice counts once", []step{add(a1), add(a1)}, "a1", "a", Counts{Total: 1, Namespace: 1, Caller: 1, Namespaces: 1, Callers: 1}, nil},
		{"consumed: out, and its Lease to delete", []step{add(a1), add(b1), {consumed: "r1"}}, "a1", "a", Counts{Total: 1, Namespaces: 2, Callers: 2}, []string{Name("r1")}},
		{"consumed before the entry was seen", []step{{consumed: "r1"}, add(a1)}, "a1", "a", Counts{Namespaces: 1, Callers: 1}, []string{Name("r1")}},
		{"consumed record pruned: the entry does not count again", []step{add(a1), {consumed: "r1"}, {pruned: "r1"}, add(a1)}, "a1", "a", Counts{Namespaces: 1, Callers: 1}, []string{Name("r1")}},
		{"deleted", []step{add(a1), add(a2), {removed: "r1"}}, "a2", "a", Counts{Total: 1, Namespace: 1, Caller: 1, Namespaces: 1, Callers: 1}, nil},
		{"past the TTL: out, and its Lease to delete", []step{add(a1), {advance: time.Hour}, add(b1), {advance: time.Second}}, "b1", "b", Counts{Total: 1, Namespace: 1, Caller: 1, Namespaces: 1, Callers: 1}, []string{Name("r1")}},
		{"seen already past the TTL", []step{{advance: 2 * time.Hour}, add(a1)}, "a1", "a", Counts{Namespaces: 1, Callers: 1}, []string{Name("r1")}},
		{"its namespace deleted: out, and its Lease to delete", []step{add(a1), add(a2), {gone: "a1"}}, "a2", "a", Counts{Total: 1, Namespace: 1, Caller: 1, Namespaces: 1, Callers: 1}, []string{Name("r1")}},
		{"a service account is its namespace's caller", []step{add(entry("r5", "n", CallerKey("system:serviceaccount:n:one"), 0))}, "n", CallerKey("system:serviceaccount:n:two"), Counts{Total: 1, Namespace: 1, Caller: 1, Namespaces: 1, Callers: 1}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testingclock.NewFakeClock(t0)
			b := NewBook(time.Hour, c)
			for _, s := range tc.steps {
				s.apply(b, c)
			}
			stale := b.Expire()
			got := b.Counts(tc.ns, tc.caller)
			got.Retained = Tally{} // the consumed records' count: TestRetainedRecordsCountPerTenant
			if got != tc.want {
				t.Errorf("counts %+v, want %+v", got, tc.want)
			}
			if !slices.Equal(stale, tc.stale) {
				t.Errorf("to delete %v, want %v", stale, tc.stale)
			}
		})
	}
}

func TestQueuePosition(t *testing.T) {
	c := testingclock.NewFakeClock(t0)
	b := NewBook(0, c)
	for i := range 5 { // ns "a": r0..r4, one a second; ns "b": one, accepted after them all
		b.Added(entry(fmt.Sprint("r", i), "a", "a", i))
	}
	b.Added(entry("s0", "b", "b", 10))
	for _, tc := range []struct {
		id, ns        string
		pos, total    int
		ok            bool
		expectedAfter time.Duration // 0: no estimate
	}{
		{"r0", "a", 1, 5, true, 0},
		{"r4", "a", 5, 5, true, 0},
		{"s0", "b", 1, 1, true, 0}, // its own namespace's queue, not behind a's
		{"zz", "b", 0, 0, false, 0},
	} {
		p, ok := b.QueuePosition(tc.ns, entry(tc.id, tc.ns, "", 0).SecretName)
		if ok != tc.ok || p.Position != tc.pos || p.Total != tc.total || !p.ExpectedStart.IsZero() {
			t.Errorf("%s: %+v %v, want position %d of %d", tc.id, p, ok, tc.pos, tc.total)
		}
	}
	// a's first two start 10 s apart: the rest are expected 10 s apart from the last start.
	b.Consumed(consumed.LeaseName("r0"))
	c.Step(10 * time.Second)
	b.Consumed(consumed.LeaseName("r1"))
	p, ok := b.QueuePosition("a", entry("r3", "a", "", 0).SecretName)
	if !ok || p.Position != 2 || p.Total != 3 || !p.ExpectedStart.Equal(c.Now().Add(20*time.Second)) {
		t.Errorf("r3 after two starts 10 s apart: %+v, want position 2 of 3 expected in 20 s", p)
	}
	c.Step(time.Minute) // late: never expected in the past
	if p, _ := b.QueuePosition("a", entry("r2", "a", "", 0).SecretName); !p.ExpectedStart.Equal(c.Now()) {
		t.Errorf("r2, overdue: expected %v, want now", p.ExpectedStart)
	}
}
