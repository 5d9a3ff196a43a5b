package fairqueue

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// harness runs work against a queue inside a synctest bubble: each op settles (every
// goroutine blocked) before the next, so the order of grants is the queue's, not the
// scheduler's.
type harness struct {
	t       *testing.T
	q       *Queue
	mu      sync.Mutex
	seats   map[string]*Seat
	granted []string
	// full: the work turned away (ErrFull), in order.
	full    []string
	cancels map[string]context.CancelFunc
}

func newHarness(t *testing.T, slots int, lending bool) *harness {
	return &harness{t: t, q: New(slots, Options{Lending: lending}), seats: map[string]*Seat{}, cancels: map[string]context.CancelFunc{}}
}

// flowOf reads "ns/caller" (the work's name is "ns/caller#n").
func flowOf(name string) Flow {
	ns, caller, _ := strings.Cut(strings.SplitN(name, "#", 2)[0], "/")
	return Flow{Namespace: ns, Caller: caller}
}

// noteErr notes work turned away.
func (h *harness) noteErr(name string, err error) {
	if errors.Is(err, ErrFull) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.full = append(h.full, name)
	}
}

func (h *harness) note(name string, s *Seat) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seats[name] = s
	h.granted = append(h.granted, name)
}

// do runs one op: "+name" acquires, "-name" releases, "lend name", "reclaim name",
// "requeue name", "resume name" (work already started), "cancel name" (ends a waiting
// acquire or resume).
func (h *harness) do(op string) {
	verb, name, _ := strings.Cut(op, " ")
	if op[0] == '+' || op[0] == '-' {
		verb, name = op[:1], op[1:]
	}
	switch verb {
	case "+":
		ctx, cancel := context.WithCancel(context.Background())
		h.cancels[name] = cancel
		go func() {
			s, err := h.q.Acquire(ctx, flowOf(name))
			if err == nil {
				h.note(name, s)
			}
			h.noteErr(name, err)
		}()
	case "resume":
		ctx, cancel := context.WithCancel(context.Background())
		h.cancels[name] = cancel
		go func() {
			if s, err := h.q.Resume(ctx, flowOf(name)); err == nil {
				h.note(name, s)
			}
		}()
	case "-":
		h.seat(name).Release()
	case "lend":
		h.seat(name).Lend()
	case "reclaim":
		s := h.seat(name)
		s.Reclaim()
		h.note("reclaim "+name, s)
	case "requeue":
		s := h.seat(name)
		ctx, cancel := context.WithCancel(context.Background())
		h.cancels["requeue "+name] = cancel
		go func() {
			err := s.Requeue(ctx)
			if err == nil {
				h.note("requeue "+name, s)
			}
			h.noteErr("requeue "+name, err)
		}()
	case "cancel":
		h.cancels[name]()
	default:
		h.t.Fatalf("unknown op %q", op)
	}
	synctest.Wait()
}

func (h *harness) seat(name string) *Seat {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.seats[name]
	if s == nil {
		h.t.Fatalf("%s holds no seat", name)
	}
	return s
}

// The order in which waiting work is granted a seat.
func TestGrantOrder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		slots   int
		lending bool
		ops     []string
		want    []string // every grant, in order
	}{
		{"a tenant alone uses every slot", 3, false,
			[]string{"+a/u#1", "+a/u#2", "+a/u#3", "+a/u#4"},
			[]string{"a/u#1", "a/u#2", "a/u#3"}},
		{"the other tenant goes before the backlog (a FIFO serves a/u#2)", 1, false,
			[]string{"+a/u#1", "+a/u#2", "+a/u#3", "+b/v#1", "-a/u#1"},
			[]string{"a/u#1", "b/v#1"}},
		{"within a flow, first come first served", 1, false,
			[]string{"+a/u#1", "+a/u#2", "+a/u#3", "-a/u#1", "-a/u#2"},
			[]string{"a/u#1", "a/u#2", "a/u#3"}},
		{"a caller in many namespaces is one tenant", 2, false,
			[]string{"+n1/u#1", "+n2/u#1", "+n3/u#1", "+m/v#1", "-n1/u#1"},
			[]string{"n1/u#1", "n2/u#1", "m/v#1"}},
		{"one slot: a caller in many namespaces takes one turn", 1, false,
			[]string{"+n1/u#1", "+n2/u#1", "+n3/u#1", "+m/v#1", "-n1/u#1", "-m/v#1"},
			[]string{"n1/u#1", "m/v#1", "n2/u#1"}},
		{"a namespace of many callers is one tenant", 2, false,
			[]string{"+n/u1#1", "+n/u2#1", "+n/u3#1", "+m/v#1", "-n/u1#1"},
			[]string{"n/u1#1", "n/u2#1", "m/v#1"}},
		{"equal holdings: the longest waiting first", 1, false,
			[]string{"+a/u#1", "+c/w#1", "+b/v#1", "-a/u#1"},
			[]string{"a/u#1", "c/w#1"}},
		{"a cancelled wait is dropped", 1, false,
			[]string{"+a/u#1", "+b/v#1", "cancel b/v#1", "+c/w#1", "-a/u#1"},
			[]string{"a/u#1", "c/w#1"}},
		{"a lent slot goes to a tenant below its share", 2, true,
			[]string{"+a/u#1", "+a/u#2", "lend a/u#1", "lend a/u#2", "+b/v#1"},
			[]string{"a/u#1", "a/u#2", "b/v#1"}},
		{"a lent slot is not taken by its own tenant", 2, true,
			[]string{"+a/u#1", "+a/u#2", "lend a/u#1", "lend a/u#2", "+a/u#3"},
			[]string{"a/u#1", "a/u#2"}},
		{"without lending a waiting holder keeps its slot", 2, false,
			[]string{"+a/u#1", "+a/u#2", "lend a/u#1", "+b/v#1"},
			[]string{"a/u#1", "a/u#2"}},
		{"a tenant within its share lends nothing", 2, true,
			[]string{"+a/u#1", "+b/v#1", "lend a/u#1", "+c/w#1"},
			[]string{"a/u#1", "b/v#1"}},
		{"a reclaim still lent is at once", 2, true,
			[]string{"+a/u#1", "lend a/u#1", "reclaim a/u#1"},
			[]string{"a/u#1", "reclaim a/u#1"}},
		{"a reclaim of a slot given away goes on without one", 2, true,
			[]string{"+a/u#1", "+a/u#2", "lend a/u#1", "+b/v#1", "reclaim a/u#1", "+a/u#3", "-b/v#1"},
			[]string{"a/u#1", "a/u#2", "b/v#1", "reclaim a/u#1", "a/u#3"}},
		{"resumed work goes ahead of its flow's work not started", 1, false,
			[]string{"+a/u#1", "+a/u#2", "+a/u#3", "resume a/u#9", "-a/u#1", "-a/u#9"},
			[]string{"a/u#1", "a/u#9", "a/u#2"}},
		{"resumed work goes ahead of its tenant's work in another namespace", 1, false,
			[]string{"+n1/u#1", "+n1/u#2", "resume n2/u#9", "-n1/u#1"},
			[]string{"n1/u#1", "n2/u#9"}},
		{"resumed work of a namespace goes ahead of another caller's there", 1, false,
			[]string{"+n/u#1", "+n/v#1", "resume n/w#9", "-n/u#1"},
			[]string{"n/u#1", "n/w#9"}},
		{"resumed work, first come first served", 1, false,
			[]string{"+a/u#1", "+a/u#2", "resume a/u#8", "resume a/u#9", "-a/u#1", "-a/u#8"},
			[]string{"a/u#1", "a/u#8", "a/u#9"}},
		{"resumed work waits its tenant's turn", 1, false,
			[]string{"+a/u#1", "+b/v#1", "resume a/u#9", "-a/u#1"},
			[]string{"a/u#1", "b/v#1"}},
		{"resumed work of a tenant holding more waits for one holding less", 2, false,
			[]string{"+a/u#1", "+x/x#1", "+b/v#1", "resume a/u#9", "-x/x#1"},
			[]string{"a/u#1", "x/x#1", "b/v#1"}},
		{"a requeue goes behind the other tenant", 1, false,
			[]string{"+a/u#1", "+b/v#1", "requeue a/u#1", "-b/v#1"},
			[]string{"a/u#1", "b/v#1", "requeue a/u#1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, tc.slots, tc.lending)
				for _, op := range tc.ops {
					h.do(op)
				}
				h.mu.Lock()
				got := slices.Clone(h.granted)
				h.mu.Unlock()
				if !slices.Equal(got, tc.want) {
					t.Errorf("grants %v, want %v", got, tc.want)
				}
				for _, cancel := range h.cancels {
					cancel()
				}
			})
		})
	}
}

// At most slots holders live without a seat, and what is in use is counted.
func TestLendingIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 2, true)
		for _, op := range []string{"+a/u#1", "+a/u#2", "lend a/u#1", "lend a/u#2", "+a/u#3",
			"+b/v#1", // a's first lent seat: a/u#1 lives on without one
			"-b/v#1", "lend a/u#3", "+a/u#4",
			"+b/v#2", // a's second: two live without a seat
			"-b/v#2", "lend a/u#4",
			"+b/v#3", // as many live without a seat as there are slots: b/v#3 waits
		} {
			h.do(op)
		}
		if got := h.q.InUse(); got != 4 {
			t.Errorf("in use %d, want 4 (2 seats, 2 holders without one)", got)
		}
		for _, op := range []string{"-a/u#1", "-a/u#2", "-a/u#3"} {
			h.do(op)
		}
		h.mu.Lock()
		got := slices.Clone(h.granted)
		h.mu.Unlock()
		if want := []string{"a/u#1", "a/u#2", "b/v#1", "a/u#3", "b/v#2", "a/u#4", "b/v#3"}; !slices.Equal(got, want) {
			t.Errorf("grants %v, want %v", got, want)
		}
		h.do("-a/u#4")
		h.do("-b/v#3")
		if got := h.q.InUse(); got != 0 {
			t.Errorf("in use %d after every release", got)
		}
		for _, cancel := range h.cancels {
			cancel()
		}
	})
}

// What the queue shows per flow: queued, oldest wait, held.
func TestStats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 1, false)
		h.do("+a/u#1")
		h.do("+b/v#1")
		time.Sleep(3 * time.Second) // the bubble's clock
		h.do("+b/v#2")
		got := h.q.Stats()
		want := []FlowStats{{Flow: Flow{"a", "u"}, Held: 1}, {Flow: Flow{"b", "v"}, Queued: 2, OldestWait: 3 * time.Second}}
		if !slices.Equal(got, want) {
			t.Errorf("stats %+v, want %+v", got, want)
		}
		for _, cancel := range h.cancels {
			cancel()
		}
	})
}
