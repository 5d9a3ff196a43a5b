package source

import (
	"context"
	"fmt"
	"sync"

	"golang.org/x/sync/semaphore"
)

// MaxIndexFetches bounds the index fetches (download and parse) under way in the whole
// service: one can hold a 10 MiB index.yaml and about 68 MiB once parsed, and submit's
// memory is every namespace's. The console's index (pkg/chartrepos: its refresh, requests
// and refetches) and the installs by index entry share it.
const MaxIndexFetches = 4

// NamespaceOwner is the owner of a namespace's index fetches in FetchSlots; "" is the
// cluster's administrators' (their repositories, the background refresh).
func NamespaceOwner(namespace string) string { return "project/" + namespace }

// FetchSlots bounds index fetches: at most total at once, and at most a share of them per
// owner (a namespace, or the cluster's administrators), so one tenant's slow server holds
// the others back by its share only. Both waits are FIFO (semaphore.Weighted) and an owner
// queues for the total with no more than its share, so the queue for the total goes round
// the owners instead of serving one owner's burst first.
type FetchSlots struct {
	total int64
	all   *semaphore.Weighted

	mu sync.Mutex
	// owners holds only the owners with a fetch under way or waiting: a tenant cannot
	// grow it by naming namespaces.
	owners map[string]*ownerSlots
}

type ownerSlots struct {
	sem   *semaphore.Weighted
	users int
}

// NewFetchSlots is total fetches at once, shared by owners as FetchSlots says.
func NewFetchSlots(total int64) *FetchSlots {
	return &FetchSlots{total: total, all: semaphore.NewWeighted(total), owners: map[string]*ownerSlots{}}
}

// share is an owner's part of the total. A namespace gets one: Index fetches a namespace's
// repositories one after another anyway, so only a tenant's own bursts (concurrent misses
// of different keys, a repository URL changed again and again) wait on it. The
// administrators' repositories ("", the refresh's) get all but one, so a tenant's first
// index never waits for a whole refresh.
func (f *FetchSlots) share(owner string) int64 {
	if owner == "" {
		return max(f.total-1, 1)
	}
	return 1
}

// Acquire waits until ctx ends for a slot of owner's share, then one of the total.
func (f *FetchSlots) Acquire(ctx context.Context, owner string) (release func(), err error) {
	o := f.enter(owner)
	if err := o.sem.Acquire(ctx, 1); err != nil {
		f.leave(owner, o)
		return nil, fmt.Errorf("wait for the %d index fetch(es) of the owner's share: %w", f.share(owner), err)
	}
	if err := f.all.Acquire(ctx, 1); err != nil {
		o.sem.Release(1)
		f.leave(owner, o)
		return nil, fmt.Errorf("wait for one of the service's %d index fetches: %w", f.total, err)
	}
	return f.releaser(owner, o), nil
}

// TryAcquire is Acquire without waiting (nor jumping the queue of those who wait).
func (f *FetchSlots) TryAcquire(owner string) (release func(), ok bool) {
	o := f.enter(owner)
	if !o.sem.TryAcquire(1) {
		f.leave(owner, o)
		return nil, false
	}
	if !f.all.TryAcquire(1) {
		o.sem.Release(1)
		f.leave(owner, o)
		return nil, false
	}
	return f.releaser(owner, o), true
}

func (f *FetchSlots) releaser(owner string, o *ownerSlots) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			f.all.Release(1)
			o.sem.Release(1)
			f.leave(owner, o)
		})
	}
}

func (f *FetchSlots) enter(owner string) *ownerSlots {
	f.mu.Lock()
	defer f.mu.Unlock()
	o := f.owners[owner]
	if o == nil {
		o = &ownerSlots{sem: semaphore.NewWeighted(f.share(owner))}
		f.owners[owner] = o
	}
	o.users++
	return o
}

// leave forgets owner once nobody holds or waits for its share (a new one is the same).
func (f *FetchSlots) leave(owner string, o *ownerSlots) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if o.users--; o.users == 0 {
		delete(f.owners, owner)
	}
}
