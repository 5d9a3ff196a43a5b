package source

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A namespace takes one slot, the administrators all but one, everyone together the total;
// an owner is forgotten once it holds and waits for none (tenants cannot grow the map).
func TestFetchSlotsShares(t *testing.T) {
	f := NewFetchSlots(4)
	var releases []func()
	take := func(owner string) bool {
		release, ok := f.TryAcquire(owner)
		if ok {
			releases = append(releases, release)
		}
		return ok
	}
	if !take(NamespaceOwner("a")) || take(NamespaceOwner("a")) {
		t.Error("namespace a: want one slot, not two")
	}
	if !take("") || !take("") || !take("") || take("") {
		t.Error("administrators: want three slots of four, not four")
	}
	if take(NamespaceOwner("b")) {
		t.Error("namespace b got a fifth slot")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := f.Acquire(ctx, NamespaceOwner("b")); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting past ctx: %v, want its error", err)
	}
	for _, release := range releases {
		release()
		release() // twice is once
	}
	if n := len(f.owners); n != 0 {
		t.Errorf("%d owners remembered with nothing under way", n)
	}
	if !take(NamespaceOwner("b")) {
		t.Error("namespace b: no slot once all are free")
	}
}
