package actionlog

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/async-helm/async-helm/pkg/wallclock"
)

// Config is the action log's environment (executor: bytes, keep, flush; notifier: max age).
type Config struct {
	// ActionLogBytes bounds one action's log (at most MaxBytes).
	ActionLogBytes int `envconfig:"ACTION_LOG_BYTES" default:"262144"`
	// ActionLogKeep is how many logs a release keeps, most recently started first.
	ActionLogKeep int `envconfig:"ACTION_LOG_KEEP" default:"5"`
	// ActionLogFlush is how often a running action's log is written when it changed.
	ActionLogFlush time.Duration `envconfig:"ACTION_LOG_FLUSH" default:"3s"`
	// ActionLogMaxAge: logs last written longer ago are deleted (by the notifier).
	ActionLogMaxAge time.Duration `envconfig:"ACTION_LOG_MAX_AGE" default:"168h"`
}

// Tail bounds: what a failed status event carries.
const (
	TailLines = 20
	TailBytes = 4096
)

// Tail is the end of a revision's log as text ("" when the log is not of request requestID).
func (s *Store) Tail(ctx context.Context, namespace, name string, revision int, requestID string) (string, error) {
	rec, err := s.Get(ctx, namespace, name, revision)
	if err != nil {
		return "", err
	}
	if requestID != "" && rec.RequestID != requestID {
		return "", nil // the log of an earlier request of a reused revision
	}
	return text(Tail(rec.Lines, TailLines, TailBytes), func(r int) string { return fmt.Sprintf(" (%d times)", r+1) }), nil
}

// PruneEvery deletes the logs last written more than maxAge ago, every interval, until ctx ends.
func (s *Store) PruneEvery(ctx context.Context, interval, maxAge time.Duration, log *zap.SugaredLogger) {
	if maxAge <= 0 || interval <= 0 {
		return
	}
	prune := func() {
		n, err := s.PruneOlder(ctx, time.Now().Add(-maxAge))
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warnw("action logs not pruned", "error", err)
		case n > 0:
			log.Infow("action logs pruned", "deleted", n, "maxAge", maxAge)
		}
	}
	prune()
	wallclock.Every(ctx, nil, interval, prune)
}
