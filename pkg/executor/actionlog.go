package executor

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/async-helm/async-helm/pkg/actionlog"
)

// ActionLogs keeps each action's Helm log in async-helm's own namespace (docs/design.md,
// "The action's log").
type ActionLogs struct {
	Store *actionlog.Store
	// Bytes bounds one action's log (actionlog.DefaultBytes when 0).
	Bytes int
	// Keep is how many logs a release keeps (actionlog.DefaultKeep when 0).
	Keep int
	// FlushEvery is how often a running action's log is written when it changed (3 s when 0).
	FlushEvery time.Duration
}

// actionLog is one action's log while it runs; a nil one does nothing.
type actionLog struct {
	w    *actionlog.Writer
	s    *Service
	act  *action
	mu   sync.Mutex
	stop func()
	done bool
}

// startActionLog begins the action's log: written at once (so that a follower finds it),
// then every FlushEvery on the service's clock until finish.
func (s *Service) startActionLog(ctx context.Context, act *action) *actionLog {
	if s.ActionLogs == nil || s.ActionLogs.Store == nil {
		return nil
	}
	buf := actionlog.NewBuffer(s.ActionLogs.Bytes, s.Clock)
	rec := actionlog.Record{Namespace: act.Namespace, Name: act.Name, Revision: act.Revision,
		RequestID: act.RequestID, Action: string(act.Action.Action)}
	l := &actionLog{w: actionlog.NewWriter(s.ActionLogs.Store, buf, rec, s.Clock), s: s, act: act}
	go func() {
		l.flush(ctx)
		if err := s.ActionLogs.Store.Prune(ctx, act.Namespace, act.Name, s.ActionLogs.Keep); err != nil {
			act.log.Warnw("older action logs not pruned", "error", err)
		}
	}()
	l.arm(ctx)
	return l
}

func (l *actionLog) arm(ctx context.Context) {
	every := l.s.ActionLogs.FlushEvery
	if every <= 0 {
		every = 3 * time.Second
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return
	}
	l.stop = l.s.afterFunc(every, func() {
		l.flush(ctx)
		l.arm(ctx)
	})
}

func (l *actionLog) flush(ctx context.Context) {
	if err := l.w.Flush(ctx, false); err != nil && ctx.Err() == nil {
		l.act.log.Warnw("action log not written; it is written again at the next flush", "error", err)
	}
}

// tee sends Helm's log to the action's log and on to next.
func (l *actionLog) tee(next func(string, ...any)) func(string, ...any) {
	if l == nil {
		return next
	}
	return func(format string, args ...any) {
		l.w.Buffer.Log(format, args...)
		next(format, args...)
	}
}

// finish writes the whole log, Helm's error last, before the outcome is recorded: the
// failed status event attaches its tail.
func (l *actionLog) finish(reqCtx context.Context, err error) {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.done = true
	if l.stop != nil {
		l.stop()
	}
	l.mu.Unlock()
	if err != nil {
		l.w.Buffer.Append(actionlog.Format("Error: %s", endedBecause(l.act, err)))
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(reqCtx), 10*time.Second)
	defer cancel()
	if err := l.w.Flush(ctx, true); err != nil {
		l.act.log.Warnw("action log not written at the end", "error", err)
	}
}

// endedBecause says why the action ended as its failure reason does (recordFailure): Helm
// only sees its context cancelled when the executor ends it.
func endedBecause(act *action, err error) string {
	kind, detail := act.end.get()
	switch kind {
	case endTimeout:
		return fmt.Sprintf("timed out after %s (%v)", detail, err)
	case endCancel:
		return fmt.Sprintf("cancelled by %s (%v)", detail, err)
	case endShutdown:
		return fmt.Sprintf("the executor shut down while the action ran (%v)", err)
	case endLost:
		return fmt.Sprintf("the lease was lost: %s (%v)", detail, err)
	}
	return err.Error()
}
