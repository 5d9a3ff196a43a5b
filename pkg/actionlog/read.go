package actionlog

import (
	"context"
	"time"

	"k8s.io/utils/clock"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/auth"
	"github.com/async-helm/async-helm/pkg/wallclock"
)

// StaleAfter: a running log unwritten this long is answered as not running (cf. HeartbeatEvery).
const StaleAfter = 2 * time.Minute

// Authorizer answers whether a user may do something (auth.Authorizer).
type Authorizer interface {
	Check(ctx context.Context, u *auth.User, needs ...auth.Need) error
}

// Reader answers GET /api/helm/release/log (a nil Authorizer or user: every release).
type Reader struct {
	Store      *Store
	Authorizer Authorizer
	// Clock tells whether a log marked running is stale (nil: the wall clock).
	Clock clock.PassiveClock
}

// Query names a log (Revision 0: the latest started) and the lines after After.
type Query struct {
	Namespace, Name string
	Revision        int
	After           int64
}

// Read answers a log to a caller who may list the namespace's secrets, checked first.
func (r *Reader) Read(ctx context.Context, u *auth.User, q Query) (*api.ActionLog, error) {
	if u != nil && r.Authorizer != nil {
		need := auth.Need{Verb: "list", Resource: "secrets", Namespace: q.Namespace}
		if err := r.Authorizer.Check(ctx, u, need); err != nil {
			return nil, err
		}
	}
	var rec *Record
	var err error
	if q.Revision > 0 {
		rec, err = r.Store.Get(ctx, q.Namespace, q.Name, q.Revision)
	} else {
		rec, err = r.Store.Latest(ctx, q.Namespace, q.Name)
	}
	if err != nil {
		return nil, err
	}
	return r.answer(rec, q.After), nil
}

func (r *Reader) answer(rec *Record, after int64) *api.ActionLog {
	out := &api.ActionLog{Namespace: rec.Namespace, Name: rec.Name, Revision: rec.Revision,
		RequestID: rec.RequestID, Action: rec.Action, Started: rec.Started, Updated: rec.Updated,
		Running: rec.Running && wallclock.Or(r.Clock).Since(rec.Updated) < StaleAfter, Dropped: rec.Dropped,
		Lines: []api.LogLine{}}
	for _, l := range rec.Lines {
		if l.Seq > after {
			out.Lines = append(out.Lines, l)
		}
	}
	return out
}
