package fairqueue

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
)

// A Requeue (a retry between its attempts, still on its sender's open request) holds the
// room its Acquire held: who is turned away from a full room, in order (Options.MaxWaiting;
// every Acquire costs 1). Before, a requeued waiter cost nothing, so the room refilled
// behind each retry and the open requests grew with the retries.
func TestARequeueHoldsItsRoom(t *testing.T) {
	for _, tc := range []struct {
		name  string
		slots int
		room  int64
		ops   []string
		want  []string // turned away, in order
	}{
		{"a retry waiting holds its place: the tenant's newcomers are turned away", 1, 2,
			[]string{"+a/u#1", "+b/v#1", "requeue a/u#1", "+a/u#2", "+a/u#3", "+a/u#4"},
			[]string{"a/u#3", "a/u#4"}},
		{"a retry makes room by turning away its tenant's work not requeued", 2, 2,
			[]string{"+a/u#1", "+h/h#1", "resume c/w#1", "+a/u#2", "+a/u#3", "requeue a/u#1"},
			[]string{"a/u#3"}},
		{"a retry is turned away when its tenant has only retries there", 2, 1,
			[]string{"+a/u#1", "+a/u#2", "resume c/w#1", "resume d/x#1", "requeue a/u#1", "requeue a/u#2"},
			[]string{"requeue a/u#2"}},
		{"at equal shares of the room, the other tenant's work not requeued goes first", 2, 1,
			[]string{"+a/u#1", "+h/h#1", "resume c/w#1", "+b/v#1", "requeue a/u#1"},
			[]string{"b/v#1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := &harness{t: t, q: New(tc.slots, Options{MaxWaiting: tc.room}), seats: map[string]*Seat{}, cancels: map[string]context.CancelFunc{}}
				for _, op := range tc.ops {
					h.do(op)
				}
				h.mu.Lock()
				got := slices.Clone(h.full)
				h.mu.Unlock()
				if !slices.Equal(got, tc.want) {
					t.Errorf("turned away %v, want %v", got, tc.want)
				}
				for _, cancel := range h.cancels {
					cancel()
				}
			})
		})
	}
}

// A requeued retry holds its place against another tenant's newcomer at equal shares of
// the room; once its wait ends without a seat it holds nothing: a Release does nothing,
// and the pool's count is right.
func TestARequeueThatGotNoSeatHoldsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(1, Options{MaxWaiting: 1})
		a, ok := q.TryAcquire(Flow{Namespace: "a", Caller: "u"})
		if !ok {
			t.Fatal("no free seat")
		}
		a.cost = 1 // as an Acquire's
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() { _, _ = q.Resume(ctx, Flow{Namespace: "c", Caller: "w"}) }()
		synctest.Wait()
		// The freed seat goes to c's resumed work; a's retry then waits alone in the room.
		done := make(chan error, 1)
		go func() { done <- a.Requeue(ctx) }()
		synctest.Wait()
		if got := q.InUse(); got != 1 {
			t.Fatalf("in use %d, want 1 (c)", got)
		}
		b, err := q.AcquireCost(ctx, Flow{Namespace: "b", Caller: "v"}, 1)
		if err == nil || b != nil {
			t.Fatalf("b's acquire with a's retry waiting in a room of 1: %v, %v", b, err)
		}
		cancel()
		if err := <-done; err == nil {
			t.Fatal("a's retry got a seat after its wait ended")
		}
		a.Release()
		if got := q.InUse(); got != 1 {
			t.Errorf("in use %d after a gave up, want 1 (c)", got)
		}
	})
}
