// Package sweeper is the loop of the leading notifier pod (Election): it drives accepted work
// whose delivery was lost again, fails it only past a deadline, queues abandoned tombstones
// and prunes consumed records (docs/design.md, "A 201 is a promise").
package sweeper

import (
	"context"
	"time"

	"go.uber.org/zap"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/clock"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/logonce"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
	"github.com/async-helm/async-helm/pkg/signing"
)

// Store is the sweeper's door to release Secrets and their Leases (release.Store, sweep.go).
type Store interface {
	PendingRevisions(ctx context.Context, namespace string) ([]release.Revision, error)
	StoredRequest(ctx context.Context, namespace, secretName string) (*release.StoredRequest, error)
	ClaimRedrive(ctx context.Context, rev release.Revision, now time.Time) (bool, error)
	MarkDeadLettered(ctx context.Context, namespace, secretName, requestID string, at time.Time) (bool, error)
	// MarkFailedAt fails a pending revision only at the resourceVersion it was read at.
	MarkFailedAt(ctx context.Context, rev release.Revision, reason string) (bool, error)
	// LastSignOfLife reads a revision's heartbeat Lease.
	LastSignOfLife(ctx context.Context, rev release.Revision) (time.Time, bool, error)
}

// Index answers the pending revisions from a cache (*release.RevisionIndex, synced).
type Index interface {
	PendingRevisions() []release.Revision
}

// Reporter is what the sweeper asks of the notifier (*notifier.Service).
type Reporter interface {
	// QueueTombstones queues every tombstone (no event announces one whose executor died).
	QueueTombstones(ctx context.Context) error
	// CachedLease is async-helm's cached Lease namespace/name (nil: none).
	CachedLease(namespace, name string) *coordinationv1.Lease
}

// ConsumedRecords are the executor's records of the requests it started (*consumed.Store).
type ConsumedRecords interface {
	Lookup(ctx context.Context, requestID string) (*consumed.Record, error)
	Prune(ctx context.Context, olderThan time.Duration) (int, error)
}

// Config tunes the sweeper.
type Config struct {
	// Interval between passes; 0 turns the sweeper off.
	Interval time.Duration
	// RedriveAfter is how long a queued revision waits, since reserved or re-sent, for a re-send.
	RedriveAfter time.Duration
	// Grace is how long a started revision may go without a live lease before it is re-sent.
	Grace time.Duration
	// QueueDeadline is how long after its reservation an unfinished revision is failed.
	QueueDeadline time.Duration
	// MaxRedrivesPerPass bounds the re-sends of one pass (0: no bound; decide.go).
	MaxRedrivesPerPass int
}

// Sweeper is the leader's loop.
type Sweeper struct {
	Store Store
	// Index, when set, lists pending revisions; nil: a LIST per namespace through Store.
	Index Index
	// Reporter, when set, is the notifier whose tombstones and cached Leases a pass uses.
	Reporter Reporter
	// Redrive sends stored accepted events back to the broker.
	Redrive events.Sink
	Log     *zap.SugaredLogger
	// Namespaces to sweep; empty sweeps all.
	Namespaces []string
	Config     Config
	// Clock dates ages and claims, and ticks the passes (nil: the wall clock).
	Clock clock.WithTicker
	// SigningKey and EventMaxAge verify a stored event; without a key none is re-sent.
	SigningKey  signing.Key
	EventMaxAge time.Duration
	// Consumed, when set, is the executor's record of consumed requests (redrive.go).
	Consumed ConsumedRecords
	// Election, when set, runs the passes only while this pod leads; nil: this pod sweeps.
	Election *Election
	// OnPass, when set, is told what each pass cost (metrics).
	OnPass func(PassStats)

	sent   sentLog     // this leader's own record of its re-sends (sentlog.go)
	pruned time.Time   // when consumed records were last pruned (redrive.go)
	once   logonce.Set // what a hostile record causes, logged once
}

// SweepResult counts what one pass did (Deferred: re-sends left for a later pass).
type SweepResult struct {
	Redriven, Failed, Deferred int
}

// PassStats is what one sweeper pass cost and did (Sweeper.OnPass).
type PassStats struct {
	Duration time.Duration
	// APICalls counts the pass's requests to the API server (0 without CountingTransport).
	APICalls int64
	// Pending is how many pending revisions of ours the pass looked at.
	Pending int
	SweepResult
}
