package fairqueue

import (
	"context"
	"fmt"
	"sync"
)

// Bytes is a budget of memory held by work in flight: a tenant holds at most a quarter of it.
type Bytes struct {
	mu         sync.Mutex
	limit      int64
	used       int64
	ns, caller map[string]int64
	// freed is closed, and made again, whenever bytes are given back.
	freed chan struct{}
}

// NewBytes is a budget of limit bytes.
func NewBytes(limit int64) *Bytes {
	return &Bytes{limit: limit, ns: map[string]int64{}, caller: map[string]int64{}, freed: make(chan struct{})}
}

// Used is the bytes held now.
func (b *Bytes) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Take gives n bytes to f if they fit now, and returns their release.
func (b *Bytes) Take(f Flow, n int64) (func(), bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.limit || b.ns[f.Namespace]+n > b.limit/4 || b.caller[f.Caller]+n > b.limit/4 {
		return nil, false
	}
	b.add(f, n)
	return func() { b.mu.Lock(); b.add(f, -n); b.mu.Unlock() }, true
}

// Hold waits until n bytes are f's (lend called once first), or ctx ends; over a share is
// ErrFull. Waiters look again whenever bytes are given back, in no order: the shares are fair.
func (b *Bytes) Hold(ctx context.Context, f Flow, n int64, lend func()) (func(), error) {
	if n > b.limit/4 {
		return nil, fmt.Errorf("%w: %d MiB, a tenant holds at most %d MiB", ErrFull, n>>20, b.limit/4>>20)
	}
	for waited := false; ; waited = true {
		b.mu.Lock()
		freed := b.freed
		b.mu.Unlock()
		if free, ok := b.Take(f, n); ok {
			return free, nil
		}
		if !waited {
			lend()
		}
		select {
		case <-freed:
		case <-ctx.Done():
			return nil, fmt.Errorf("%d MiB: the %d MiB or the tenant's %d MiB are taken: %w", n>>20, b.limit>>20, b.limit/4>>20, context.Cause(ctx))
		}
	}
}

// add counts d bytes more for f, as the seats are counted; given back, the waiters look again.
func (b *Bytes) add(f Flow, d int64) {
	b.used += d
	bumpNS(b.ns, f.Namespace, d)
	bump(b.caller, f.Caller, d)
	if d < 0 {
		close(b.freed)
		b.freed = make(chan struct{})
	}
}
