package sweeper

import (
	"context"
	"time"

	"github.com/async-helm/async-helm/pkg/wallclock"
)

// pruneEvery spaces the prunes of consumed records: a record is pruned an hour after it
// could be replayed, so a prune every few minutes loses nothing, and one LIST of every
// consumed request (one per accepted request of the last hours) each 10 s pass would be
// most of the pass's cost at scale.
const pruneEvery = 5 * time.Minute

// pruneConsumed drops consumed records no event can be replayed against any more: older
// than EVENT_MAX_AGE, with an hour to spare. At most once per pruneEvery (a LIST of one
// namespace).
func (s *Sweeper) pruneConsumed(ctx context.Context) {
	if s.Consumed == nil || s.EventMaxAge <= 0 {
		return
	}
	now := wallclock.Or(s.Clock).Now()
	if !s.pruned.IsZero() && now.Sub(s.pruned) < pruneEvery {
		return
	}
	s.pruned = now
	if n, err := s.Consumed.Prune(ctx, s.EventMaxAge+time.Hour); err != nil {
		s.Log.Warnw("prune of consumed requests failed", "error", err)
	} else if n > 0 {
		s.Log.Infow("pruned consumed requests", "count", n)
	}
}
