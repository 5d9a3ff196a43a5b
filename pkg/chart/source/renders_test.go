package source

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// One caller at its allowed rate with a slow template fills both render slots and keeps
// asking: when one of its renders ends, the slot goes to another caller who waits, not to
// its own next render that asked first; and that caller's later render, finding no slot
// freed within the wait, is refused (429), not queued for ever.
func TestRenderSlotsShareByCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := NewRenderSlots(2, 10*time.Second)
		a := TenantOf(callerCtx("a"), "a")
		var releases []func()
		for range 2 {
			release, err := r.Take(context.Background(), a)
			if err != nil {
				t.Fatalf("caller a alone: %v", err)
			}
			releases = append(releases, release)
		}
		got := make(chan string, 2)
		refused := make(chan error, 2)
		take := func(who, ns string) {
			release, err := r.Take(context.Background(), TenantOf(callerCtx(who), ns))
			if err != nil {
				refused <- err
				return
			}
			got <- who
			_ = release // held: a slow render
		}
		go take("a", "a")
		synctest.Wait()
		go take("b", "b")
		synctest.Wait()
		releases[0]()
		synctest.Wait()
		if first := <-got; first != "b" {
			t.Errorf("the freed render slot went to caller %s, want b", first)
		}
		time.Sleep(11 * time.Second) // the fake clock of the bubble: past the wait
		if err := <-refused; !errors.Is(err, ErrRendersBusy) {
			t.Errorf("caller a's render with no slot freed: %v, want ErrRendersBusy", err)
		}
	})
}
