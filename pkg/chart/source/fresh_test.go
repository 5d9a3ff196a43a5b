package source

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The executor's Fresh loads of a checked chart wait for the source's load slots too:
// twice per action, up to containerConcurrency actions at once, they loaded all at once.
func TestFreshWaitsForALoadSlot(t *testing.T) {
	src := &Source{HTTP: Policy{AllowLoopback: true}.HTTPClient(time.Minute), MaxParallelLoads: 1}
	c, err := src.Get(context.Background(), Ref{URL: serve(t, tgz(t, chartYAML("tiny")))})
	if err != nil {
		t.Fatal(err)
	}
	held, _ := src.loads.TryAcquire(Tenant{Namespace: "other"}) // the one slot taken
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := c.Fresh(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Fresh with the slot taken: %v, want it to wait until its context ends", err)
	}
	held.Release()
	if ch, err := c.Fresh(context.Background()); err != nil || ch.Name() != "tiny" {
		t.Errorf("Fresh with the slot free: %v, %v", ch, err)
	}
}
