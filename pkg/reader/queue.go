package reader

import (
	"time"

	"k8s.io/utils/clock"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/ledger"
	"github.com/async-helm/async-helm/pkg/progress"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/wallclock"
)

// QueueIndex says where a queued revision stands in its namespace's queue (ledger.Book):
// a map lookup and a binary search, so a list marks each pending row without walking it.
type QueueIndex interface {
	QueuePosition(namespace, secretName string) (ledger.Position, bool)
}

// Queue adds `queue` to the pending revisions no executor has started (nil: nothing).
type Queue struct {
	Index QueueIndex
	// Clock is the clock of AgeSeconds (nil: the wall clock).
	Clock clock.PassiveClock
}

// of is a revision's queue, nil when not queued: progress on its Lease means an executor started
// it, whatever the index still says (Helm's adoption drops the queued label a little later).
func (q *Queue) of(namespace, name string, version int, p *progress.Progress) *api.Queue {
	if q == nil || q.Index == nil || p != nil {
		return nil
	}
	pos, ok := q.Index.QueuePosition(namespace, release.SecretName(name, version))
	if !ok {
		return nil
	}
	age := max(wallclock.Or(q.Clock).Since(pos.AcceptedAt), 0)
	out := &api.Queue{State: api.QueueStateQueued, Position: pos.Position, Total: pos.Total,
		AcceptedAt: pos.AcceptedAt.UTC().Truncate(time.Second), AgeSeconds: int64(age / time.Second)}
	if !pos.ExpectedStart.IsZero() {
		at := pos.ExpectedStart.UTC().Truncate(time.Second)
		out.ExpectedStart = &at
	}
	return out
}

// mark adds the queue to the pending rows of a list (in place) and returns them.
func (q *Queue) mark(rows []api.ReleaseInfo) []api.ReleaseInfo {
	if q == nil {
		return rows
	}
	for i := range rows {
		r := &rows[i]
		if r.Info != nil && release.IsPending(r.Info.Status.String()) {
			r.Queue = q.of(r.Namespace, r.Name, r.Version, nil)
		}
	}
	return rows
}
