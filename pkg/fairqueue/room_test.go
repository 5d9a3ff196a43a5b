package fairqueue

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
)

// Who is turned away from a full room (Options.MaxWaiting): the one slot is held, work
// arrives in order ("ns/caller#n", optionally "=cost"), and exactly the named are refused.
func TestTheRoomTurnsAwayTheTenantWaitingTheMost(t *testing.T) {
	for _, c := range []struct {
		name     string
		max      int64
		arrivals []string
		want     []string
	}{
		{name: "free places: anyone waits", max: 3,
			arrivals: []string{"a/a#1", "a/a#2", "b/b#1"}},
		{name: "full: the newest of the tenant waiting the most makes room for another", max: 3,
			arrivals: []string{"a/a#1", "a/a#2", "a/a#3", "b/b#1"}, want: []string{"a/a#3"}},
		{name: "full: a tenant that waits the most turns its own newcomer away", max: 3,
			arrivals: []string{"a/a#1", "a/a#2", "b/b#1", "a/a#3"}, want: []string{"a/a#3"}},
		{name: "a caller over two namespaces is one tenant", max: 4,
			arrivals: []string{"a1/u#1", "a1/u#2", "a2/u#1", "a2/u#2", "b/v#1"}, want: []string{"a2/u#2"}},
		{name: "a namespace with many callers is one tenant", max: 3,
			arrivals: []string{"x/u#1", "x/v#1", "x/w#1", "y/z#1"}, want: []string{"x/w#1"}},
		{name: "equal tenants: the newcomer", max: 2,
			arrivals: []string{"a/a#1", "b/b#1", "c/c#1"}, want: []string{"c/c#1"}},
		{name: "a newcomer over its share is turned away, nobody else", max: 4,
			arrivals: []string{"a/a#1", "a/a#2", "a/a#3", "a/a#4", "b/b#1=3"}, want: []string{"b/b#1=3"}},
		{name: "a newcomer within its share takes the places it needs", max: 6,
			arrivals: []string{"a/a#1", "a/a#2", "a/a#3", "a/a#4", "a/a#5", "a/a#6", "b/b#1=2"}, want: []string{"a/a#5", "a/a#6"}},
		{name: "work larger than the room is turned away", max: 2,
			arrivals: []string{"a/a#1=3"}, want: []string{"a/a#1=3"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				if got := turnedAway(t, c.max, c.arrivals); !slices.Equal(got, c.want) {
					t.Errorf("turned away %v, want %v", got, c.want)
				}
			})
		})
	}
}

// turnedAway queues arrivals in order behind the one held slot of a queue of room max and
// returns those refused, sorted.
func turnedAway(t *testing.T, max int64, arrivals []string) []string {
	q := New(1, Options{MaxWaiting: max})
	if _, ok := q.TryAcquire(Flow{Namespace: "holder", Caller: "holder"}); !ok {
		t.Fatal("no free seat")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var out []string
	for _, name := range arrivals {
		cost := int64(1)
		if base, c, ok := strings.Cut(name, "="); ok {
			n, _ := strconv.Atoi(c)
			cost, name = int64(n), base+"="+c
		}
		go func() {
			_, err := q.AcquireCost(ctx, flowOf(name), cost)
			if errors.Is(err, ErrFull) {
				mu.Lock()
				out = append(out, name)
				mu.Unlock()
			}
		}()
		synctest.Wait()
	}
	slices.Sort(out)
	return out
}
