package notifier

import (
	"context"

	"github.com/async-helm/async-helm/pkg/release"
)

// Recording a reported status (MarkNotified) is a compare-and-swap that rewrites the whole
// Secret, slow on a loaded API server: in watch mode a worker hands the key to the marks
// queue and goes on to the next event; a mark worker records the status the secret has in
// the index if every status seen of it was reported. A mark not made (a crash after the
// send) means one duplicate event after a restart, under the same id, which the contract
// allows.

// processMark records one secret's reported status; false when the queue shut down.
func (s *Service) processMark(ctx context.Context) bool {
	key, quit := s.marks.Get()
	if quit {
		return false
	}
	defer s.marks.Done(key)
	if err := s.markReported(ctx, key); err != nil {
		if ctx.Err() == nil {
			s.Log.Warnw("reported status not recorded yet; will retry", "key", key, "retries", s.marks.NumRequeues(key), "error", err)
		}
		s.marks.AddRateLimited(key)
		return true
	}
	s.marks.Forget(key)
	return true
}

// markReported records the status the index has for key when all that was seen of it was
// reported; otherwise the worker still reporting it queues the mark again when done.
func (s *Service) markReported(ctx context.Context, key string) error {
	m, err := s.Revisions.Get(key)
	if err != nil || m == nil {
		return err // deleted: nothing to record
	}
	rev, ok := release.RevisionFromMeta(m)
	if !ok || s.reported(rev) || !s.reportedAll(key, rev.Status) {
		return nil
	}
	return s.markNotified(ctx, rev)
}

// reportedAll: status is the last one observed of key and nothing of key awaits reporting.
func (s *Service) reportedAll(key, status string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.backlog[key]) == 0 && s.observed[key] == status && !s.history[key]
}

// markNotified records the reported status on the secret, signed (reported.go), as a
// compare-and-swap (Store.MarkNotified): if Helm changed the secret meanwhile, the new
// status is reported next.
func (s *Service) markNotified(ctx context.Context, rev release.Revision) error {
	return s.Store.MarkNotified(ctx, rev, s.markSignature(rev))
}
