package executor

import (
	"context"
	"time"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/progress"
	"github.com/async-helm/async-helm/pkg/release/lease"
	"github.com/async-helm/async-helm/pkg/wallclock"
)

// watch records the action's progress on its Lease every ProgressInterval and notices a
// cancel request there (one API call per tick: a write when the progress changed, else a read).
func (s *Service) watch(ctx context.Context, held Lease, phases *progress.Phases, a events.Action, start time.Time,
	lost func(string), cancelled func(by string) (stop bool)) {
	every := s.ProgressInterval
	if every <= 0 {
		every = 2 * time.Second
	}
	var collector *progress.Collector
	if client, err := s.Helm.Client(s.callerOptions(a)...); err == nil {
		collector = &progress.Collector{Client: client, Namespace: a.Namespace, Release: a.Name, Applied: phases.Workloads,
			Since: start, Ready: s.Helm.Readiness()}
	}
	// A retry's progress says which attempt it is (remediate.go).
	last := progress.Progress{Attempt: a.Attempt}
	seen := false // a cancel request already answered
	t := wallclock.Or(s.Clock).NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		p := last
		p.Phase, p.Hook = phases.Current()
		if collector != nil && s.readWorkloads(p.Phase) {
			_ = collector.Workloads(ctx, &p) // a failed read keeps the last counts
		}
		if !p.Same(last) || last.Updated.IsZero() {
			p.Updated = wallclock.Or(s.Clock).Now()
			last = p
		}
		reason, err := held.Sync(ctx, lease.AnnotationProgress, last.Encode())
		switch {
		case err != nil:
			continue // transient; the heartbeat decides whether the lease is lost
		case reason != "":
			lost(reason)
			return
		}
		if by := held.CancelledBy(); by != "" && !seen {
			if cancelled(by) {
				return
			}
			seen = true
		}
	}
}

// readWorkloads says whether a progress tick reads the release's workloads and the
// namespace's Warning events: only while Helm waits for them (readiness, hooks), and no
// more than ProgressReads times a second for the whole executor.
func (s *Service) readWorkloads(phase string) bool {
	switch phase {
	case progress.PhaseWaiting, progress.PhasePreHooks, progress.PhasePostHooks:
	default:
		return false
	}
	return s.progressReads == nil || s.progressReads.Allow()
}
