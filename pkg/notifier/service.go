package notifier

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/lru"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/logonce"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
	"github.com/async-helm/async-helm/pkg/release/lease"
	"github.com/async-helm/async-helm/pkg/signing"
)

// Store is the notifier's one door to release Secrets and tombstones (release.Store).
type Store interface {
	ReleaseMeta(ctx context.Context, namespace, secretName string) (*metav1.PartialObjectMetadata, error)
	ReleaseMetas(ctx context.Context, namespace string) ([]*metav1.PartialObjectMetadata, error)
	// Head reads the head of a record at a resourceVersion (nil: gone).
	Head(ctx context.Context, namespace, secretName, resourceVersion string) (*release.Head, error)
	// MarkNotified records rev.Status as reported, with the notifier's signature (marks.go).
	MarkNotified(ctx context.Context, rev release.Revision, sig string) error
	// Alive reads a revision's heartbeat Lease.
	Alive(ctx context.Context, namespace, key string) (bool, error)
	// The tombstones of uninstalls (tombstones.go): a page, one, and its delete (as read).
	TombstonePage(ctx context.Context, namespace, cont string) ([]lease.Tombstone, string, error)
	ReadTombstone(ctx context.Context, namespace, lease string) (*lease.Tombstone, error)
	BuryTombstone(ctx context.Context, t lease.Tombstone) error
}

// ConsumedRecords are the executor's records of the requests it started, where tenants
// cannot write (*consumed.Store): only their outcome says an uninstall happened.
type ConsumedRecords interface {
	Lookup(ctx context.Context, requestID string) (*consumed.Record, error)
}

// Service is the notifier.
type Service struct {
	// Client runs the Lease informers and reads namespaces; all else goes through Store.
	Client kubernetes.Interface
	// Metadata builds the RevisionIndex when Revisions is nil.
	Metadata metadata.Interface
	Store    Store
	Sender   events.Sink
	Log      *zap.SugaredLogger
	// Namespaces to watch; empty watches all.
	Namespaces []string
	// Revisions is the shared index of release secrets (built by Start when nil).
	Revisions *release.RevisionIndex
	// Workers sending events in parallel; 0 is DefaultWorkers.
	Workers int
	// ProgressInterval rate-limits progress events per revision; 0 sends none.
	ProgressInterval time.Duration
	// SigningKey signs and verifies the marks (marks.go); empty: the mark alone counts.
	SigningKey signing.Key
	// Since is no later than when the notifiers first ran (history.go); zero: no history.
	Since time.Time
	// Clock dates ages and ticks the progress events (nil: the wall clock).
	Clock clock.WithTicker
	// Consumed, when set, is the executor's record of consumed requests (tombstones.go).
	Consumed ConsumedRecords
	// ActionLogs, when set, gives failed status events the tail of the action's log.
	ActionLogs LogTails

	leases  leaseCache  // async-helm's Leases (leases.go)
	startup startupFeed // the start-up backlog waiting for its turn (startup.go)
	// queue holds the keys to report, one namespace at a time in turn (fairkeys.go); marks
	// the secrets whose reported status is to be recorded (watch mode, marks.go).
	queue, marks workqueue.TypedRateLimitingInterface[string]
	mu           sync.Mutex
	// observed: the last status seen per secret; backlog: those not reported yet, in order.
	observed map[string]string
	backlog  map[string][]string
	// history holds the secrets first seen as history (history.go) and unchanged since.
	history map[string]bool
	// watching: lookups are answered by Revisions (watch mode) rather than by a GET.
	watching bool
	// gone holds the last labels of deleted secrets with statuses still to report.
	gone map[string]release.Revision
	// vanished marks deleted secrets of our pending revisions (vanished.go).
	vanished map[string]bool
	graves   struct{ namespace, cont string } // the next page of uncached tombstones
	once     logonce.Set                      // what a hostile record causes, logged once
	charts   *lru.Cache                       // charts of records without a label (charts.go)
}

// DefaultWorkers: a change waits on the mark's compare-and-swap (p50 ~100 ms, p90 ~400 ms
// loaded); 4 workers queued changes 0.4 s at p50, 32 keep the queue empty within the QPS limit.
const DefaultWorkers = 32

// Init prepares the queues; Start calls it, and so may a caller that enqueues before.
func (s *Service) Init() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.observed == nil {
		s.observed, s.backlog, s.gone = map[string]string{}, map[string][]string{}, map[string]release.Revision{}
		s.vanished, s.history = map[string]bool{}, map[string]bool{}
		s.charts = lru.New(ChartsCached)
	}
	if s.queue == nil {
		s.queue, s.marks = newKeyQueue("release-status"), newKeyQueue("release-status-marks")
	}
}

// LogTails reads the end of a revision's action log (actionlog.Store.Tail).
type LogTails interface {
	Tail(ctx context.Context, namespace, name string, revision int, requestID string) (string, error)
}

// CachedLease is async-helm's cached Lease (nil: none); trust only one alive (release.AliveIn).
func (s *Service) CachedLease(namespace, name string) *coordinationv1.Lease {
	return s.leases.get(namespace, name)
}
