package sweeper

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/wallclock"
)

// sweepGuarded is sweep with a backstop: one revision that panics does not stop the pass.
func (s *Sweeper) sweepGuarded(ctx context.Context, rev release.Revision, res *SweepResult) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("recovered panic: %v", r)
		}
	}()
	return s.sweep(ctx, rev, res)
}

// sweepRetry bounds one sweep's decisions on a record rewritten between read and write.
var sweepRetry = wait.Backoff{Steps: 8, Duration: 10 * time.Millisecond, Factor: 1.0, Jitter: 0.1}

// errRecordChanged: the record was not at the version decided on when it was written.
var errRecordChanged = errors.New("release record changed since it was read")

func retriable(err error) bool {
	return errors.Is(err, errRecordChanged) || apierrors.IsConflict(err)
}

// sweep decides on rev as listed, then as read, again on each rewrite between read and write
// (sweepRetry): a tenant rewriting faster must not pass QUEUE_DEADLINE. Unchanged: not again.
func (s *Sweeper) sweep(ctx context.Context, rev release.Revision, res *SweepResult) error {
	listed, decided := true, ""
	err := retry.OnError(sweepRetry, retriable, func() error {
		err := s.sweepRead(ctx, rev, listed, &decided, res)
		listed = false
		return err
	})
	if retriable(err) {
		s.once.Warn(s.Log, "rewritten/"+string(rev.UID), "release record rewritten on every read of the sweep; looked at again next pass",
			"namespace", rev.Namespace, "secret", rev.SecretName, "tries", sweepRetry.Steps)
		return nil
	}
	return err
}

// sweepRead is one try of sweep: listed, rev is the listing's, decided on before the record
// is read; otherwise only the record read now; decided is the version last decided on.
func (s *Sweeper) sweepRead(ctx context.Context, rev release.Revision, listed bool, decided *string, res *SweepResult) error {
	var d due
	if listed {
		*decided = rev.ResourceVersion
		ok, err := s.dueOf(ctx, &rev, &d, res)
		if err != nil || !ok {
			return err
		}
	}
	sr, err := s.Store.StoredRequest(ctx, rev.Namespace, rev.SecretName)
	if errors.Is(err, release.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	// Every decision is on the record read, at the version decided on: the index may be
	// behind (a queued install may since have been deployed and uninstalled by hand).
	if !listed && sr.Revision.ResourceVersion == *decided {
		return nil // unchanged since the last try's write found nothing to fail
	}
	if !listed || sr.Revision.ResourceVersion != rev.ResourceVersion {
		if !sr.Revision.Ours || !release.IsPending(sr.Revision.Status) {
			return nil
		}
		rev = sr.Revision
		*decided = rev.ResourceVersion
		if ok, err := s.dueOf(ctx, &rev, &d, res); err != nil || !ok {
			return err
		}
	}
	return s.act(ctx, rev, sr, d, res)
}

// dueOf gathers into d whether rev's record is to be read; a mark dated in the future fails here.
func (s *Sweeper) dueOf(ctx context.Context, rev *release.Revision, d *due, res *SweepResult) (bool, error) {
	now := wallclock.Or(s.Clock).Now()
	if v, forged := futureMark(*rev, now); forged {
		return false, s.apply(ctx, *rev, v, nil, res)
	}
	if *d = s.Config.clocked(*rev, now, rev.Created); s.Config.waiting(*rev, *d) {
		return false, nil
	}
	if s.Config.deferred(*rev, *d, res.Redriven) {
		res.Deferred++
		return false, nil
	}
	var err error
	if d.since, d.alive, err = s.lastSignOfLife(ctx, *rev); err != nil {
		return false, err
	}
	return s.Config.decideLife(*rev, *d).action == read, nil
}

// act decides on a due revision from its record, reading its stored event only when needed.
func (s *Sweeper) act(ctx context.Context, rev release.Revision, sr *release.StoredRequest, d due, res *SweepResult) error {
	r := record{undecodable: sr.Undecodable != nil, hasEvent: len(sr.Event) > 0}
	if r.undecodable {
		s.once.Warn(s.Log, "undecodable/"+string(sr.Revision.UID),
			"release record does not decode; failed in its labels", "namespace", rev.Namespace, "secret", rev.SecretName, "error", sr.Undecodable)
	}
	v := s.Config.decideRecord(rev, r, d, false)
	if v.action != read {
		return s.apply(ctx, rev, v, nil, res)
	}
	e, refusal, err := s.checkStored(ctx, sr)
	if err != nil {
		return err
	}
	if r.refusal = refusal; refusal != "" {
		s.once.Warn(s.Log, "refused/"+string(sr.Revision.UID),
			"stored request not sent again", "namespace", rev.Namespace, "secret", rev.SecretName, "reason", refusal)
	}
	return s.apply(ctx, rev, s.Config.decideRecord(rev, r, d, true), &e, res)
}

// apply is where a sweep writes: it fails rev, or claims the re-send (at the version read).
func (s *Sweeper) apply(ctx context.Context, rev release.Revision, v verdict, e *cloudevents.Event, res *SweepResult) error {
	switch v.action {
	case fail:
		return s.failStuck(ctx, rev, v.reason, res)
	case resend:
		// A compare-and-swap: of two notifiers (or one racing Helm), one sends nothing.
		if ok, err := s.Store.ClaimRedrive(ctx, rev, v.at); err != nil || !ok {
			return err
		}
		sendCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		s.sent.record(rev, wallclock.Or(s.Clock).Now())
		if err := s.Redrive.Send(sendCtx, *e); err != nil {
			return fmt.Errorf("re-send %s/%s: %w", rev.Namespace, rev.SecretName, err)
		}
		res.Redriven++
	}
	return nil
}

// failStuck fails a pending revision of ours at the version read (else errRecordChanged).
func (s *Sweeper) failStuck(ctx context.Context, rev release.Revision, reason string, res *SweepResult) error {
	if !rev.Ours || !release.IsPending(rev.Status) {
		return nil
	}
	done, err := s.Store.MarkFailedAt(ctx, rev, reason)
	if done {
		res.Failed++
	}
	if err == nil && !done {
		// Not at the version read (or gone, or no longer pending): sweep reads it again.
		return errRecordChanged
	}
	return err
}

// lastSignOfLife is when an executor last worked on the revision; a Lease the cache shows
// alive costs no call (a GET each was most of a pass at thousands of running revisions).
func (s *Sweeper) lastSignOfLife(ctx context.Context, rev release.Revision) (time.Time, bool, error) {
	if s.Reporter != nil && release.AliveIn(s.Reporter.CachedLease(rev.Namespace, release.LeaseName(rev.Name, rev.Version)), wallclock.Or(s.Clock).Now()) {
		return time.Time{}, true, nil
	}
	return s.Store.LastSignOfLife(ctx, rev)
}
