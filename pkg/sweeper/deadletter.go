package sweeper

import (
	"context"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/wallclock"
)

// DeadLetter takes an accepted event the broker gave up delivering. The reservation still
// holds the work: the revision is marked for the sweeper to send again, never failed here.
// It reports whether a pending revision of that request was marked.
func (s *Sweeper) DeadLetter(ctx context.Context, a events.Action) (bool, error) {
	return s.Store.MarkDeadLettered(ctx, a.Namespace, a.SecretName, a.RequestID, wallclock.Or(s.Clock).Now())
}
