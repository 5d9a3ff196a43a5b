package submitter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/async-helm/async-helm/pkg/auth"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/wallclock"
)

// SupersedeOptions bound how long a request with supersede waits for the revision it
// cancels to end before it reserves its own (docs/design.md, "Supersede").
type SupersedeOptions struct {
	// Wait is the longest wait for the cancelled revision to be final (default 30 s); past
	// it the request answers 503 and reserves nothing (the cancel stands).
	Wait time.Duration
	// Poll is how often the live history is read meanwhile (default 250 ms).
	Poll time.Duration
}

func (o SupersedeOptions) wait() time.Duration {
	if o.Wait > 0 {
		return o.Wait
	}
	return 30 * time.Second
}

func (o SupersedeOptions) poll() time.Duration {
	if o.Poll > 0 {
		return o.Poll
	}
	return 250 * time.Millisecond
}

// ErrNotSupersedable is a pending revision a new request may not take the place of (409):
// an uninstall, or a running rollback (cancel's rule).
var ErrNotSupersedable = errors.New("cannot be superseded")

// readFrom says where a request's revision is computed from.
type readFrom int

const (
	fromCache readFrom = iota // Store.CachedNextRevision: the informer's cache when there is one
	fromAPI                   // Store.LiveNextRevision: after the cache's revision was taken
)

// withLiveRetry runs attempt with the cache's revision and, when the create found a guessed
// revision taken (guessTaken), once more from a live read: the cache lags behind a client's
// own 201. A live revision found taken is a real race: 409, never retried (a retried
// supersede would cancel the winner's revision).
func (s *Service) withLiveRetry(attempt func(readFrom) (*Accepted, error)) (*Accepted, error) {
	acc, err := attempt(fromCache)
	var guess guessTaken
	if errors.As(err, &guess) {
		return attempt(fromAPI)
	}
	return acc, err
}

// guessTaken is Reserve's ErrConflict on a revision the cache guessed, nothing written.
type guessTaken struct{ error }

func (g guessTaken) Unwrap() error { return g.error }

// reserveErr is Reserve's error, marked guessTaken when it is a conflict on a guessed revision.
func reserveErr(err error, guessed bool) error {
	if guessed && errors.Is(err, release.ErrConflict) {
		return guessTaken{err}
	}
	return err
}

// nextRevision is Store.CachedNextRevision (or LiveNextRevision); with supersede, a pending
// revision is the one to supersede and the request's is the next, read live. No writes.
func (s *Service) nextRevision(ctx context.Context, namespace, name string, action release.Action, supersede bool, from readFrom) (rev int, old *release.Revision, guessed bool, err error) {
	if from == fromAPI {
		rev, err = s.Store.LiveNextRevision(ctx, namespace, name, action)
	} else {
		rev, guessed, err = s.Store.CachedNextRevision(ctx, namespace, name, action)
	}
	var pending *release.PendingError
	if !supersede || action == release.ActionInstall || !errors.As(err, &pending) {
		return rev, nil, guessed, err
	}
	o, err := s.supersedable(ctx, namespace, name, pending.Revision)
	if err != nil {
		return 0, nil, false, err
	}
	// o's version is its Secret's name, which a tenant chooses: bounded, never wrapped.
	if rev, err = release.NextAfter(namespace, name, o.Version); err != nil {
		return 0, nil, false, err
	}
	return rev, &o, false, nil
}

// supersedable reads the pending revision live and checks that it may be cancelled for a
// new request: not an uninstall, not a running rollback.
func (s *Service) supersedable(ctx context.Context, namespace, name string, version int) (release.Revision, error) {
	revs, err := s.Store.LiveHistory(ctx, namespace, name)
	if err != nil {
		return release.Revision{}, err
	}
	// The release's own newest record, as a cancel finds it (latestRecord): never another
	// release's Secret labelled with this name, whose request the supersede would bind.
	old, ok := latestRecord(revs, name)
	if !ok || !release.IsPending(old.Status) {
		// It ended meanwhile: the request goes as one without supersede would now.
		return release.Revision{}, fmt.Errorf("%w: revision %d of %s/%s ended while the request was read; send it again",
			release.ErrConflict, version, namespace, name)
	}
	if old.Status == release.StatusUninstalling {
		// A PendingError too: the edge answers 409 as for any request while one is pending.
		return old, fmt.Errorf("%w (%s/%s): an uninstall %w", &release.PendingError{Revision: old.Version, Status: old.Status},
			namespace, name, ErrNotSupersedable)
	}
	if err := s.refuseRunning(ctx, old); err != nil {
		return old, fmt.Errorf("%w: %w", ErrNotSupersedable, err)
	}
	return old, nil
}

// refuseTarget refuses a rollback to the revision it supersedes: that one never ran.
func refuseTarget(old *release.Revision, to int) error {
	if old != nil && old.Version == to {
		return fmt.Errorf("%w: revision %d is the one the rollback supersedes", ErrInvalid, to)
	}
	return nil
}

// supersede cancels the pending revision old (nil: none) for request id of revision rev as
// a cancel does, and returns once old is final; past Supersede.Wait, ErrNotAccepted (503).
func (s *Service) supersede(ctx context.Context, old *release.Revision, user *auth.User, rev int, id string) error {
	if old == nil {
		return nil
	}
	who := "anonymous"
	if user != nil {
		who = user.Name
	}
	by := fmt.Sprintf("%s: superseded by revision %d, request %s", who, rev, id)
	running, err := s.Heartbeat.RequestCancel(ctx, old.Namespace, old.SecretName, old.RequestID, by)
	if err != nil {
		return fmt.Errorf("supersede revision %d of %s/%s: %w", old.Version, old.Namespace, old.Name, err)
	}
	if running {
		return s.awaitEnd(ctx, *old)
	}
	// Nobody runs it, and the Lease now keeps anyone from starting it.
	undo := context.WithoutCancel(ctx)
	defer func() { _ = s.Heartbeat.ReleaseCancel(undo, old.Namespace, old.SecretName, by) }()
	if err := s.bindQueued(ctx, *old); err != nil {
		return err
	}
	reason := fmt.Sprintf("Release %q failed: cancelled by %s; no executor had started it", old.Name, by)
	if _, err := s.Store.MarkFailed(ctx, old.Namespace, old.Name, old.Version, reason, release.KeepFailed); err != nil {
		return fmt.Errorf("supersede revision %d of %s/%s: %w", old.Version, old.Namespace, old.Name, err)
	}
	return nil
}

// maxSupersedeTicks caps the backoff of awaitEnd's reads, in polls: a revision a tenant
// keeps "running" costs a supersede 7 reads in 30 s, not 120.
const maxSupersedeTicks = 40

// awaitEnd reads the live history at doubling intervals (counted in polls) until revision
// old is no longer pending (or gone).
func (s *Service) awaitEnd(ctx context.Context, old release.Revision) error {
	deadline := wallclock.Or(s.Clock).Now().Add(s.Supersede.wait())
	t := time.NewTicker(s.Supersede.poll())
	defer t.Stop()
	for tick, next, gap := 0, 0, 2; ; tick++ {
		if tick == next {
			revs, err := s.Store.LiveHistory(ctx, old.Namespace, old.Name)
			if err != nil && ctx.Err() == nil {
				return fmt.Errorf("supersede revision %d of %s/%s: %w", old.Version, old.Namespace, old.Name, err)
			}
			if err == nil && ended(revs, old.SecretName) {
				return nil
			}
			next, gap = next+gap, min(2*gap, maxSupersedeTicks)
		}
		if ctx.Err() != nil || !wallclock.Or(s.Clock).Now().Before(deadline) {
			return fmt.Errorf("%w: revision %d of %s/%s is being cancelled and has not ended within %s; nothing was reserved: send the request again once it is failed",
				ErrNotAccepted, old.Version, old.Namespace, old.Name, s.Supersede.wait())
		}
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
}

// ended says whether the record of Secret secretName is final or gone, found by its
// Secret's name (latestRecord), never by its version label, which the tenant can move.
func ended(revs []release.Revision, secretName string) bool {
	i := slices.IndexFunc(revs, func(r release.Revision) bool { return r.SecretName == secretName })
	return i < 0 || !release.IsPending(revs[i].Status)
}
