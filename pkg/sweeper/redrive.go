package sweeper

import (
	"context"
	"fmt"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/wallclock"
)

// checkStored decides whether a pending revision's stored event (a tenant's, perhaps) is re-sent:
// submit's within EventMaxAge, this Secret's request, consumed (if so) for this UID.
func (s *Sweeper) checkStored(ctx context.Context, sr *release.StoredRequest) (cloudevents.Event, string, error) {
	var e cloudevents.Event
	rev := sr.Revision
	if err := e.UnmarshalJSON(sr.Event); err != nil {
		return e, "its stored request is not an event", nil
	}
	if len(s.SigningKey) == 0 {
		return e, "the notifier has no key to verify its stored request", nil
	}
	if err := events.Verify(e, s.SigningKey, wallclock.Or(s.Clock).Now(), s.EventMaxAge); err != nil {
		return e, fmt.Sprintf("its stored request is not submit's: %v", err), nil
	}
	bound, err := events.BoundSecret(e, s.SigningKey)
	switch {
	case err != nil:
		return e, fmt.Sprintf("its stored request is not submit's: %v", err), nil
	case bound != "" && bound != rev.UID: // an executor kept the delivered (bound) copy
		return e, "its stored request was accepted for another release record", nil
	}
	a, err := events.ParseAccepted(e)
	if err != nil {
		return e, fmt.Sprintf("its stored request is not an accepted request: %v", err), nil
	}
	if a.Namespace != rev.Namespace || a.Name != rev.Name || a.Revision != rev.Version ||
		a.RequestID != rev.RequestID || e.ID() != a.RequestID || a.Action.PendingStatus() != rev.Status {
		return e, fmt.Sprintf("its stored request (%s of %s/%s revision %d, request %s) is not this revision's (%s, request %s)",
			a.Action, a.Namespace, a.Name, a.Revision, a.RequestID, rev.Status, rev.RequestID), nil
	}
	if s.Consumed != nil {
		rec, err := s.Consumed.Lookup(ctx, a.RequestID)
		if err != nil {
			return e, "", err
		}
		if rec != nil && rec.SecretUID != rev.UID {
			return e, fmt.Sprintf("its request %s was consumed for another release record", a.RequestID), nil
		}
		if rec != nil && rec.Outcome != "" { // a finished record rewound to pending
			return e, fmt.Sprintf("its request %s already ran (%s)", a.RequestID, rec.Outcome), nil
		}
	}
	if bound == "" {
		refusal := s.bindStored(&e, rev)
		return e, refusal, nil
	}
	return e, "", nil
}

// reserveWindow bounds how long after signing a reservation's Secret may be created (the API
// server sets creationTimestamp: a tenant cannot backdate it).
const reserveWindow = 2 * time.Minute

// bindStored binds an unbound stored event to the Secret it is re-sent for, as submit does;
// a Secret created well after its request was made again under the name and is refused.
func (s *Sweeper) bindStored(e *cloudevents.Event, rev release.Revision) string {
	if late := rev.Created.Sub(e.Time()); late > reserveWindow {
		return fmt.Sprintf("its Secret was created %s after its request was accepted (made again under its name?)", late.Round(time.Second))
	}
	events.BindSecret(e, s.SigningKey, rev.UID)
	return ""
}

// pruneEvery spaces the prunes of consumed records (pruned an hour after they could be
// replayed): a LIST of them all every 10 s pass would be most of its cost at scale.
const pruneEvery = 5 * time.Minute

// pruneConsumed drops consumed records older than EVENT_MAX_AGE and an hour, every pruneEvery.
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

// DeadLetter marks a dead-lettered event's revision for the sweeper to send again; true: marked.
func (s *Sweeper) DeadLetter(ctx context.Context, a events.Action) (bool, error) {
	return s.Store.MarkDeadLettered(ctx, a.Namespace, a.SecretName, a.RequestID, wallclock.Or(s.Clock).Now())
}
