package sweeper

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/wallclock"
)

// pass is one pass of the loop; a panic is logged and the next tick sweeps again.
func (s *Sweeper) pass(ctx context.Context) {
	defer func() {
		if r := recover(); r != nil {
			s.Log.Errorw("recovered a panic in the sweep", "panic", r)
		}
	}()
	start := time.Now()      // the pass's cost in real time, whatever clock decides
	calls := &atomic.Int64{} // the API calls made with ctx (CountingTransport)
	ctx = context.WithValue(ctx, callsKey{}, calls)
	res, pending, err := s.sweepAll(ctx)
	if err != nil {
		s.Log.Warnw("sweep failed", "error", err)
	}
	if s.Reporter != nil {
		if err := s.Reporter.QueueTombstones(ctx); err != nil {
			s.Log.Warnw("tombstone sweep failed", "error", err)
		}
	}
	s.pruneConsumed(ctx)
	st := PassStats{Duration: time.Since(start), APICalls: calls.Load(), Pending: pending, SweepResult: res}
	s.logPass(st)
	if s.OnPass != nil {
		s.OnPass(st)
	}
}

// logPass: one line per pass that did something or took long, at debug level otherwise.
func (s *Sweeper) logPass(st PassStats) {
	log := s.Log.Debugw
	if st.Redriven > 0 || st.Failed > 0 || st.Duration > time.Second {
		log = s.Log.Infow
	}
	log("sweep pass", "seconds", st.Duration.Seconds(), "apiCalls", st.APICalls, "pending", st.Pending,
		"redriven", st.Redriven, "failed", st.Failed, "deferred", st.Deferred)
}

// SweepOnce re-sends the stored event of lost deliveries and fails what passed the queue deadline.
func (s *Sweeper) SweepOnce(ctx context.Context) (SweepResult, error) {
	res, _, err := s.sweepAll(ctx)
	return res, err
}

// sweepAll is SweepOnce, also counting the pending revisions of ours it looked at.
func (s *Sweeper) sweepAll(ctx context.Context) (SweepResult, int, error) {
	var res SweepResult
	revs, err := s.pendingRevisions(ctx)
	if err != nil {
		return res, 0, err
	}
	s.sent.forget(revs)
	s.sent.overlay(revs, s.Config, wallclock.Or(s.Clock).Now())
	s.Config.longestDueFirst(revs)
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
	return res, ours, nil
}

// pendingRevisions are the shared index's when watching (not a LIST of 10,000 each pass).
func (s *Sweeper) pendingRevisions(ctx context.Context) ([]release.Revision, error) {
	if s.Index != nil {
		return s.Index.PendingRevisions(), nil
	}
	var out []release.Revision
	for _, ns := range release.Watched(s.Namespaces) {
		revs, err := s.Store.PendingRevisions(ctx, ns)
		if err != nil {
			return nil, err
		}
		out = append(out, revs...)
	}
	return out, nil
}

// Start runs the passes until ctx ends (only while leading, with an Election); Index synced first.
func (s *Sweeper) Start(ctx context.Context) error {
	switch {
	case s.Config.Interval <= 0:
	case s.Election == nil:
		go s.loop(ctx)
	default:
		if _, err := s.Election.config(nil); err != nil {
			return err
		}
		go func() {
			if err := s.Election.Run(ctx, s.lead); err != nil {
				s.Log.Errorw("leader election stopped: this notifier no longer sweeps", "error", err)
			}
		}()
	}
	return nil
}

func (s *Sweeper) loop(ctx context.Context) {
	wallclock.Every(ctx, s.Clock, s.Config.Interval, func() { s.pass(ctx) })
}

// lead is the leader's duty: a pass at once (no wait for a new leader), then the loop.
func (s *Sweeper) lead(ctx context.Context) {
	s.pass(ctx)
	s.loop(ctx)
}

// The sweeper counts each pass's API calls: CountingTransport counts those of the pass's ctx.

type callsKey struct{}

// CountingTransport wraps a client's transport (rest.Config.WrapTransport) to count calls.
func CountingTransport(rt http.RoundTripper) http.RoundTripper {
	return countingTransport{rt}
}

type countingTransport struct{ next http.RoundTripper }

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if n, ok := r.Context().Value(callsKey{}).(*atomic.Int64); ok {
		n.Add(1)
	}
	return c.next.RoundTrip(r)
}
