package auth

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
)

// reviewTimeout bounds a review shared by several requests (or sent ahead for none): it
// does not end with the request that happened to start it. Every request waiting for it
// gets its answer, an error included, so it is generous: an overloaded API server may take
// more than 10 s, and a timeout fails every request of that caller in flight.
const reviewTimeout = 30 * time.Second

// aheadAtOnce bounds the refreshes ahead in flight. Nobody waits for them, so nothing else
// bounds them: one list of 1,000 namespaces past half their TTL would start 1,000 reviews
// on the client every reservation uses. A refresh that finds no slot waits for one, up to
// aheadWaiting of them (past that it is skipped: the cached answer stands until its end,
// and the next request after it reviews in the foreground), so that the answers one list
// cached do not all expire together and come back in the foreground.
const (
	aheadAtOnce  = 8
	aheadWaiting = 4096
)

// CacheCounts say how the caches of an Authenticator or Authorizer answered: Hits from the
// cache, Reviews sent to the API server (refreshes ahead included), Joined requests that
// waited for a review another request had started.
type CacheCounts struct {
	Hits, Reviews, Joined int64
}

// reviewGroup sends at most one review per key at a time: concurrent misses of one key
// share it, and a refresh ahead of expiry is sent once whoever asks for it.
type reviewGroup struct {
	g                     singleflight.Group
	hits, reviews, joined atomic.Int64

	// The refreshes ahead: running (at most aheadAtOnce), waiting in order, and the keys
	// of both (a key is refreshed once at a time).
	aheadMu      sync.Mutex
	aheadRunning int
	aheadQueue   []aheadReview
	aheadKeys    map[string]bool
}

// aheadReview is a refresh ahead waiting for a slot.
type aheadReview struct {
	key    string
	review func(context.Context) (any, error)
}

// do runs review once for every caller of key in flight and waits for it, or for ctx.
func (r *reviewGroup) do(ctx context.Context, key string, review func(context.Context) (any, error)) (any, error) {
	ch := r.g.DoChan(key, r.counted(review))
	select {
	case res := <-ch:
		if res.Shared {
			r.joined.Add(1)
		}
		return res.Val, res.Err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// ahead refreshes key: now if fewer than aheadAtOnce refreshes run, else once one ends
// (aheadWaiting at most wait); nothing when key is refreshing or waiting already. Nobody
// waits for it (the cached answer stands until its end).
func (r *reviewGroup) ahead(key string, review func(context.Context) (any, error)) {
	r.aheadMu.Lock()
	if r.aheadKeys == nil {
		r.aheadKeys = map[string]bool{}
	}
	full := r.aheadRunning >= aheadAtOnce
	if r.aheadKeys[key] || (full && len(r.aheadQueue) >= aheadWaiting) {
		r.aheadMu.Unlock()
		return
	}
	r.aheadKeys[key] = true
	if full {
		r.aheadQueue = append(r.aheadQueue, aheadReview{key: key, review: review})
		r.aheadMu.Unlock()
		return
	}
	r.aheadRunning++
	r.aheadMu.Unlock()
	r.startAhead(aheadReview{key: key, review: review})
}

// startAhead runs a refresh in its slot, then the next waiting one in the same slot.
func (r *reviewGroup) startAhead(a aheadReview) {
	ch := r.g.DoChan(a.key, r.counted(a.review))
	go func() {
		<-ch
		r.aheadMu.Lock()
		delete(r.aheadKeys, a.key)
		if len(r.aheadQueue) == 0 {
			r.aheadRunning--
			r.aheadQueue = nil // the array of a drained queue is not kept
			r.aheadMu.Unlock()
			return
		}
		next := r.aheadQueue[0]
		r.aheadQueue = r.aheadQueue[1:]
		r.aheadMu.Unlock()
		r.startAhead(next)
	}()
}

// counted gives review a context of its own, bounded, and counts it.
func (r *reviewGroup) counted(review func(context.Context) (any, error)) func() (any, error) {
	return func() (any, error) {
		r.reviews.Add(1)
		ctx, cancel := context.WithTimeout(context.Background(), reviewTimeout)
		defer cancel()
		return review(ctx)
	}
}

func (r *reviewGroup) counts() CacheCounts {
	return CacheCounts{Hits: r.hits.Load(), Reviews: r.reviews.Load(), Joined: r.joined.Load()}
}
