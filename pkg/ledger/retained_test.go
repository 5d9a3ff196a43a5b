package ledger

import (
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/async-helm/async-helm/pkg/release/consumed"
)

// Each consumed record counts for its tenant while it is kept: its namespace from the
// record, its caller from the entry whichever was seen first, until it is pruned or older
// than Retain.
func TestRetainedRecordsCountPerTenant(t *testing.T) {
	const retain = 4 * time.Hour
	consume := func(b *Book, id, ns string, at time.Time) {
		b.ConsumedAs(consumed.LeaseName(id), Consumption{Namespace: ns, At: at})
	}
	for _, tc := range []struct {
		name       string
		steps      func(b *Book, c *testingclock.FakeClock)
		ns, caller string
		want       Tally
	}{
		{"none", func(*Book, *testingclock.FakeClock) {}, "a", "m", Tally{Namespaces: 1, Callers: 1}},
		{"a request consumed: its record counts for its namespace and caller", func(b *Book, c *testingclock.FakeClock) {
			b.Added(entry("r1", "a", "m", 0))
			consume(b, "r1", "a", t0)
		}, "a", "m", Tally{Total: 1, Namespace: 1, Caller: 1, Namespaces: 1, Callers: 1}},
		{"the entry seen after its record (a replica's start)", func(b *Book, c *testingclock.FakeClock) {
			consume(b, "r1", "a", t0)
			b.Added(entry("r1", "a", "m", 0))
		}, "b", "m", Tally{Total: 1, Caller: 1, Namespaces: 2, Callers: 1}},
		{"a record whose entry was never seen: its namespace only", func(b *Book, c *testingclock.FakeClock) {
			consume(b, "r1", "a", t0)
		}, "a", "m", Tally{Total: 1, Namespace: 1, Namespaces: 1, Callers: 1}},
		{"a record without its namespace: the entry's", func(b *Book, c *testingclock.FakeClock) {
			b.Added(entry("r1", "a", "m", 0))
			b.Consumed(consumed.LeaseName("r1"))
		}, "a", "", Tally{Total: 1, Namespace: 1, Namespaces: 1, Callers: 1}},
		{"seen twice counts once", func(b *Book, c *testingclock.FakeClock) {
			consume(b, "r1", "a", t0)
			consume(b, "r1", "a", t0)
		}, "a", "", Tally{Total: 1, Namespace: 1, Namespaces: 1}},
		{"pruned: out", func(b *Book, c *testingclock.FakeClock) {
			consume(b, "r1", "a", t0)
			consume(b, "r2", "a", t0)
			b.Pruned(consumed.LeaseName("r1"))
		}, "a", "", Tally{Total: 1, Namespace: 1, Namespaces: 1}},
		{"older than Retain: out", func(b *Book, c *testingclock.FakeClock) {
			consume(b, "r1", "a", t0)
			c.Step(time.Hour)
			consume(b, "r2", "a", c.Now())
			c.Step(retain - time.Minute)
			b.Expire()
		}, "a", "", Tally{Total: 1, Namespace: 1, Namespaces: 1}},
		{"consumed long ago: never counts", func(b *Book, c *testingclock.FakeClock) {
			c.Step(retain + time.Minute)
			consume(b, "r1", "a", t0)
		}, "a", "", Tally{Namespaces: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testingclock.NewFakeClock(t0)
			b := NewBook(time.Hour, c)
			b.Retain = retain
			tc.steps(b, c)
			if got := b.Counts(tc.ns, tc.caller).Retained; got != tc.want {
				t.Errorf("retained %+v, want %+v", got, tc.want)
			}
		})
	}
}

// A record that stopped counting still pairs with its entry: the entry never counts as
// queued again.
func TestAnExpiredRecordStillClearsItsEntry(t *testing.T) {
	c := testingclock.NewFakeClock(t0)
	b := NewBook(0, c)
	b.Retain = time.Hour
	b.ConsumedAs(consumed.LeaseName("r1"), Consumption{Namespace: "a", At: t0})
	c.Step(2 * time.Hour)
	b.Expire()
	b.Added(entry("r1", "a", "m", 0))
	if got := b.Counts("a", "m"); got.Total != 0 || got.Retained.Total != 0 {
		t.Errorf("counts %+v, want nothing queued or retained", got)
	}
}

func TestDecideRetained(t *testing.T) {
	lim := Limits{Max: 2000, PerNamespace: 1000, MaxRetained: 100}
	for _, tc := range []struct {
		name  string
		r     Tally
		scope string // "" admits
		limit int
	}{
		{"below the bound", Tally{Total: 99, Namespace: 99, Caller: 99, Namespaces: 1, Callers: 1}, "", 0},
		{"a tenant alone may use the whole bound, then is refused", Tally{Total: 100, Namespace: 100, Caller: 100, Namespaces: 1, Callers: 1}, "of the namespace, over its share", 100},
		{"a newcomer beside it is admitted", Tally{Total: 100, Namespaces: 2, Callers: 2}, "", 0},
		{"a caller over its share in a namespace of its own", Tally{Total: 150, Namespace: 0, Caller: 100, Namespaces: 3, Callers: 2}, "of the caller, over its share", 50},
		{"no ceiling: a tenant within its share far past the bound", Tally{Total: 500, Namespace: 2, Caller: 2, Namespaces: 9, Callers: 9}, "", 0},
		{"no bound", Tally{Total: 9000, Namespace: 9000, Namespaces: 1}, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := lim
			if tc.name == "no bound" {
				l.MaxRetained = 0
			}
			r := Decide(Counts{Namespaces: 1, Callers: 1, Retained: tc.r}, l)
			switch {
			case tc.scope == "" && r != nil:
				t.Errorf("refused %+v, want admitted", *r)
			case tc.scope != "" && (r == nil || r.Scope != tc.scope || r.Limit != tc.limit || r.Counted != CountedRetained):
				t.Errorf("%+v, want refused %q at %d (retained)", r, tc.scope, tc.limit)
			}
		})
	}
}

// A deleted namespace makes no more requests: its records stop counting for it, and for
// no one when their caller is unknown; a known caller keeps them.
func TestRetainedRecordsOfADeletedNamespace(t *testing.T) {
	c := testingclock.NewFakeClock(t0)
	b := NewBook(time.Hour, c)
	b.Added(entry("r1", "gone", "m", 0))
	b.ConsumedAs(consumed.LeaseName("r1"), Consumption{Namespace: "gone", At: t0})
	b.ConsumedAs(consumed.LeaseName("r2"), Consumption{Namespace: "gone", At: t0})
	b.ConsumedAs(consumed.LeaseName("r3"), Consumption{Namespace: "kept", At: t0})
	if got := b.Namespaces(); len(got) != 2 {
		t.Fatalf("namespaces to check %v, want gone and kept", got)
	}
	b.NamespaceGone("gone")
	want := Tally{Total: 2, Namespace: 0, Caller: 1, Namespaces: 2, Callers: 1}
	if got := b.Counts("gone", "m").Retained; got != want {
		t.Errorf("after the delete: %+v, want %+v (r1 for its caller, r3 for kept)", got, want)
	}
}
