package notifier

import (
	"context"
	"errors"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
)

// attachLogTail puts the end of the failed action's log, if any, on its status event.
func (s *Service) attachLogTail(ctx context.Context, c *events.StatusChange) {
	if s.ActionLogs == nil || c.Status != "failed" {
		return
	}
	tail, err := s.ActionLogs.Tail(ctx, c.Namespace, c.Name, c.Revision, c.RequestID)
	if err != nil && !errors.Is(err, release.ErrNotFound) {
		s.Log.Warnw("action log not read; the failed event goes without its tail",
			"namespace", c.Namespace, "release", c.Name, "revision", c.Revision, "error", err)
	}
	c.LogTail = tail
}
