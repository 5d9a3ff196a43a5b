package notifier

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/wallclock"
)

// SweepConfig tunes the sweeper.
type SweepConfig struct {
	// Interval between passes; 0 turns the sweeper off.
	Interval time.Duration
	// RedriveAfter is how long a queued revision waits, since it was reserved or last
	// re-sent, before its stored event is sent again.
	RedriveAfter time.Duration
	// Grace is how long a started revision may go without a live lease before its event is
	// sent again (another executor takes the lease over).
	Grace time.Duration
	// QueueDeadline is how long after its reservation a revision that never finished may
	// stay pending; then it is failed, with the reason.
	QueueDeadline time.Duration
}

// SweepResult counts what one pass did.
type SweepResult struct {
	Redriven, Failed int
	// Unqueued counts the queued labels dropped from final records (freeHeldSlots).
	Unqueued int
}

// maxClockSkew is how far ahead of the notifier's clock a revision's mark may be dated
// (another pod's clock) before the sweeper takes it for a forgery.
const maxClockSkew = 5 * time.Minute

func (s *Service) sweepLoop(ctx context.Context) {
	t := wallclock.Or(s.Clock).NewTicker(s.Sweep.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			s.sweepPass(ctx)
		}
	}
}

// lead is the leader's duty (Election): a pass at once, so that a new leader takes over
// the sweeper without waiting an interval, then the loop until leadership ends.
func (s *Service) lead(ctx context.Context) {
	s.sweepPass(ctx)
	s.sweepLoop(ctx)
}

// PassStats is what one sweeper pass cost and did (Service.OnPass; the notifier exposes
// them as metrics).
type PassStats struct {
	Duration time.Duration
	// APICalls counts the requests the pass sent to the API server (CountingTransport;
	// 0 when the clients were not built with it).
	APICalls int64
	// Pending is how many pending revisions of ours the pass looked at.
	Pending          int
	Redriven, Failed int
}

// sweepPass is one pass of the loop, with a backstop: a panic is logged and the next tick
// sweeps again (the guarded decode is the fix; this keeps the loop alive regardless).
func (s *Service) sweepPass(ctx context.Context) {
	defer func() {
		if r := recover(); r != nil {
			s.Log.Errorw("recovered a panic in the sweep", "panic", r)
		}
	}()
	start := time.Now() // the pass's cost in real time, whatever clock decides
	ctx, calls := countCalls(ctx)
	res, pending, err := s.sweepAll(ctx)
	if err != nil {
		s.Log.Warnw("sweep failed", "error", err)
	}
	if err := s.sweepTombstones(ctx); err != nil {
		s.Log.Warnw("tombstone sweep failed", "error", err)
	}
	s.pruneConsumed(ctx)
	st := PassStats{Duration: time.Since(start), APICalls: calls.Load(), Pending: pending,
		Redriven: res.Redriven, Failed: res.Failed}
	s.logPass(st)
	if s.OnPass != nil {
		s.OnPass(st)
	}
}

// logPass: one line per pass that did something or took long, at debug level otherwise.
func (s *Service) logPass(st PassStats) {
	log := s.Log.Debugw
	if st.Redriven > 0 || st.Failed > 0 || st.Duration > time.Second {
		log = s.Log.Infow
	}
	log("sweep pass", "seconds", st.Duration.Seconds(), "apiCalls", st.APICalls, "pending", st.Pending,
		"redriven", st.Redriven, "failed", st.Failed)
}

// SweepOnce looks at every pending revision async-helm wrote: it re-sends the stored event
// of work whose delivery was lost, and fails what passed the queue deadline. Revisions that
// are not ours (the helm CLI's, Flux's, or later ones carrying our copied labels) are never
// touched.
func (s *Service) SweepOnce(ctx context.Context) (SweepResult, error) {
	res, _, err := s.sweepAll(ctx)
	return res, err
}

// sweepAll is SweepOnce, also counting the pending revisions of ours it looked at.
func (s *Service) sweepAll(ctx context.Context) (SweepResult, int, error) {
	var res SweepResult
	revs, err := s.pendingRevisions(ctx)
	if err != nil {
		return res, 0, err
	}
	ours := 0
	for _, rev := range revs {
		if !rev.Ours {
			continue
		}
		ours++
		if err := s.sweepGuarded(ctx, rev, &res); err != nil {
			s.Log.Warnw("sweep of a revision failed", "namespace", rev.Namespace, "secret", rev.SecretName, "error", err)
		}
	}
	s.freeHeldSlots(ctx, &res)
	s.forgetMarks(wallclock.Or(s.Clock).Now())
	return res, ours, nil
}

// pendingRevisions are the pending revisions to sweep: from the shared index when the
// notifier watches (no API call: a LIST of 10,000 revisions every pass was the pass's
// cost), else one LIST per watched namespace.
func (s *Service) pendingRevisions(ctx context.Context) ([]release.Revision, error) {
	if s.watching {
		return s.Revisions.PendingRevisions(), nil
	}
	var out []release.Revision
	for _, ns := range s.namespaces() {
		revs, err := s.Store.PendingRevisions(ctx, ns)
		if err != nil {
			return nil, err
		}
		out = append(out, revs...)
	}
	return out, nil
}

// sweepGuarded is sweep with a backstop: one revision that panics does not stop the pass.
func (s *Service) sweepGuarded(ctx context.Context, rev release.Revision, res *SweepResult) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("recovered panic: %v", r)
		}
	}()
	return s.sweep(ctx, rev, res)
}

// sweepRetry bounds how often one sweep of a revision decides again on its record when it
// was rewritten between the sweeper's read and its write (client-go's DefaultRetry, a few
// more steps).
var sweepRetry = wait.Backoff{Steps: 8, Duration: 10 * time.Millisecond, Factor: 1.0, Jitter: 0.1}

// errRecordChanged: the record was not at the version decided on when it was written;
// it is read and decided on again.
var errRecordChanged = errors.New("release record changed since it was read")

func retriable(err error) bool {
	return errors.Is(err, errRecordChanged) || apierrors.IsConflict(err)
}

// due is what one sweep of a revision found before it read the record.
type due struct {
	now, since, lastSent time.Time
	alive, overdue       bool
}

// sweep decides on rev as listed, then on its record as read, again on a fresh read each
// time the record changed between read and write (sweepRetry). A failure written once on
// a conflict let a tenant who rewrote its record faster than the round trip keep it past
// QUEUE_DEADLINE; each read is decided on anew, as the record may have left pending.
// A record read again at the version last decided on did not change: the write found it
// not to fail (a final payload under pending labels), and it is not tried again.
func (s *Service) sweep(ctx context.Context, rev release.Revision, res *SweepResult) error {
	listed, decided := true, ""
	err := retry.OnError(sweepRetry, retriable, func() error {
		err := s.sweepRead(ctx, rev, listed, &decided, res)
		listed = false
		return err
	})
	if retriable(err) {
		s.once.warn(s.Log, "rewritten/"+string(rev.UID), "release record rewritten on every read of the sweep; looked at again next pass",
			"namespace", rev.Namespace, "secret", rev.SecretName, "tries", sweepRetry.Steps)
		return nil
	}
	return err
}

// sweepRead is one try of sweep: listed, rev is the listing's (the index may be a watch
// event behind), decided on before the record is read; otherwise only the record read
// now is decided on; decided is the resourceVersion the last try decided on.
func (s *Service) sweepRead(ctx context.Context, rev release.Revision, listed bool, decided *string, res *SweepResult) error {
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
	// Every decision is on the record read, at the version it was decided on: the index may
	// be behind (a revision listed as our queued install may since have been deployed and
	// marked uninstalling by a hand-run helm uninstall, stored event gone). A record changed
	// since it was listed is decided on again as read, if it is still ours and pending.
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

// dueOf says whether rev needs its record read (a re-send or a failure may be due), and
// sets rev's clock (markStart) and d. A mark dated in the future is failed here.
func (s *Service) dueOf(ctx context.Context, rev *release.Revision, d *due, res *SweepResult) (bool, error) {
	*d = due{now: wallclock.Or(s.Clock).Now()}
	if rev.Created.After(d.now.Add(maxClockSkew)) {
		// An uninstall's clock starts at Helm's modifiedAt label, which the tenant may
		// write: a mark dated far ahead is a forgery, failed at once.
		return false, s.failStuck(ctx, *rev, fmt.Sprintf("Release %q failed: revision %d is marked at %s, in the future (marked failed by the notifier)",
			rev.Name, rev.Version, rev.Created.UTC().Format(time.RFC3339)), res)
	}
	// Within the skew the label could still be moved ahead again and again, and a Secret
	// made again has a new creationTimestamp: a sealed revision's clock is never later than
	// the sweeper's first sight of it, nor than its signed acceptance (markclock.go).
	var err error
	if rev.Created, err = s.markStart(ctx, *rev, d.now); err != nil {
		return false, err
	}
	d.lastSent = rev.Created
	if rev.SentAt.After(d.lastSent) {
		d.lastSent = rev.SentAt
	}
	d.overdue = d.now.Sub(rev.Created) >= s.Sweep.QueueDeadline
	if rev.Queued && !d.overdue && !rev.DeadLettered && d.now.Sub(d.lastSent) < s.Sweep.RedriveAfter {
		return false, nil // cheap path: most queued revisions are simply waiting for a slot
	}
	d.since, d.alive, err = s.lastSignOfLife(ctx, *rev)
	// A live Lease does not hold off QueueDeadline for a revision still queued: that Lease
	// is in the tenant's namespace (anyone there can keep it "alive"), and an executor that
	// runs a revision does not leave it queued for long (Helm's adoption rewrite drops the
	// label, and MAX_ACTION_TIME < QUEUE_DEADLINE).
	if err != nil || (d.alive && !(rev.Queued && d.overdue)) {
		return false, err
	}
	if !rev.Queued && d.now.Sub(d.since) < s.Sweep.Grace {
		return false, nil // its executor may just have died: the broker's redelivery comes first
	}
	return true, nil
}

// act does what a due revision needs, from its record sr (read at rev's version): fail
// it, or send its stored event again.
func (s *Service) act(ctx context.Context, rev release.Revision, sr *release.StoredRequest, d due, res *SweepResult) error {
	if sr.Undecodable != nil {
		s.once.warn(s.Log, "undecodable/"+string(sr.Revision.UID),
			"release record does not decode; failed in its labels", "namespace", rev.Namespace, "secret", rev.SecretName, "error", sr.Undecodable)
		return s.failStuck(ctx, sr.Revision, fmt.Sprintf("Release %q failed: revision %d cannot run: its release record does not decode (marked failed by the notifier)",
			rev.Name, rev.Version), res)
	}
	if d.overdue || len(sr.Event) == 0 {
		return s.failStuck(ctx, rev, s.stuckReason(rev, d.now, d.since, d.overdue), res)
	}
	e, refusal, err := s.checkStored(ctx, sr)
	if err != nil {
		return err
	}
	if refusal != "" {
		s.once.warn(s.Log, "refused/"+string(sr.Revision.UID),
			"stored request not sent again", "namespace", rev.Namespace, "secret", rev.SecretName, "reason", refusal)
		return s.failStuck(ctx, sr.Revision, fmt.Sprintf("Release %q failed: revision %d was not sent again: %s (marked failed by the notifier)",
			rev.Name, rev.Version, refusal), res)
	}
	if !rev.Queued && !rev.DeadLettered && d.now.Sub(d.lastSent) < s.Sweep.Grace {
		return nil // re-sent recently; give that delivery its time
	}
	// The claim carries the resourceVersion the checks above read.
	if ok, err := s.claim(ctx, rev, d.now); err != nil || !ok {
		return err
	}
	sendCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := s.Redrive.Send(sendCtx, e); err != nil {
		return fmt.Errorf("re-send %s/%s: %w", rev.Namespace, rev.SecretName, err)
	}
	res.Redriven++
	return nil
}

// stuckReason says why a pending revision is failed: past the queue deadline, or no
// executor and no stored request to send again.
func (s *Service) stuckReason(rev release.Revision, now, since time.Time, overdue bool) string {
	if !overdue {
		return fmt.Sprintf("Release %q failed: revision %d has no live executor for %s and no stored request to send again (marked failed by the notifier)",
			rev.Name, rev.Version, now.Sub(since).Round(time.Second))
	}
	what := fmt.Sprintf("its executor was lost (no live lease for %s)", now.Sub(since).Round(time.Second))
	if rev.Queued {
		what = "it never started: no executor took it"
	}
	return fmt.Sprintf("Release %q failed: revision %d was pending for %s and %s; its request was sent %d more times (marked failed by the notifier)",
		rev.Name, rev.Version, now.Sub(rev.Created).Round(time.Second), what, rev.Sent)
}

// failStuck fails one of our pending revisions with reason, at the version it was read at
// (MarkFailedAt: a record that does not decode is failed in its labels); errRecordChanged
// when it did not.
func (s *Service) failStuck(ctx context.Context, rev release.Revision, reason string, res *SweepResult) error {
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

// claim records a re-send on the secret (Store.ClaimRedrive, a compare-and-swap): of two
// notifiers, or a notifier racing Helm's adoption, one loses and sends nothing.
func (s *Service) claim(ctx context.Context, rev release.Revision, now time.Time) (bool, error) {
	return s.Store.ClaimRedrive(ctx, rev, now)
}

// lastSignOfLife is when an executor last showed it worked on the revision
// (Store.LastSignOfLife: its heartbeat Lease's expiry, else the secret's last write).
// A Lease the lease cache shows alive costs no call: at thousands of running revisions a
// GET each per pass was most of the pass; anything else is read from the API server.
func (s *Service) lastSignOfLife(ctx context.Context, rev release.Revision) (time.Time, bool, error) {
	if release.AliveIn(s.leases.get(rev.Namespace, release.LeaseName(rev.Name, rev.Version)), wallclock.Or(s.Clock).Now()) {
		return time.Time{}, true, nil
	}
	return s.Store.LastSignOfLife(ctx, rev)
}

// DeadLetter takes an accepted event the broker gave up delivering. The reservation still
// holds the work: the revision is marked for the sweeper to send again, never failed here.
// It reports whether a pending revision of that request was marked.
func (s *Service) DeadLetter(ctx context.Context, a events.Action) (bool, error) {
	return s.Store.MarkDeadLettered(ctx, a.Namespace, a.SecretName, a.RequestID, wallclock.Or(s.Clock).Now())
}
