package notifier

import (
	"context"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"go.uber.org/zap"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/lru"

	"github.com/async-helm/async-helm/pkg/logonce"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
	"github.com/async-helm/async-helm/pkg/release/lease"
	"github.com/async-helm/async-helm/pkg/signing"
)

// EventSender delivers one event and reports whether the sink acknowledged it.
type EventSender interface {
	Send(ctx context.Context, e cloudevents.Event) error
}

// Store is the notifier's one door to release Secrets and tombstones (release.Store):
// every read, decode and patch of a record goes through it.
type Store interface {
	ReleaseMeta(ctx context.Context, namespace, secretName string) (*metav1.PartialObjectMetadata, error)
	ReleaseMetas(ctx context.Context, namespace string) ([]*metav1.PartialObjectMetadata, error)
	// Head reads the head of a record at a resourceVersion (nil: gone).
	Head(ctx context.Context, namespace, secretName, resourceVersion string) (*release.Head, error)
	// MarkNotified records rev.Status as reported, with the notifier's signature (reported.go).
	MarkNotified(ctx context.Context, rev release.Revision, sig string) error
	// Alive reads a revision's heartbeat Lease.
	Alive(ctx context.Context, namespace, key string) (bool, error)
	// TombstonePage, ReadTombstone and BuryTombstone list a page of, read and delete (as
	// read) the tombstones of uninstalls (tombstones.go).
	TombstonePage(ctx context.Context, namespace, cont string) ([]lease.Tombstone, string, error)
	ReadTombstone(ctx context.Context, namespace, lease string) (*lease.Tombstone, error)
	BuryTombstone(ctx context.Context, t lease.Tombstone) error
}

// ConsumedRecords are the executor's records of the requests it started, in async-helm's
// own namespace where tenants cannot write (*consumed.Store): only the outcome recorded
// there says an uninstall happened (tombstones.go).
type ConsumedRecords interface {
	Lookup(ctx context.Context, requestID string) (*consumed.Record, error)
}

// Service is the notifier.
type Service struct {
	// Client runs the Lease informers (progress, tombstones) and reads namespaces; every
	// other read of a Lease or Secret goes through Store.
	Client kubernetes.Interface
	// Metadata builds the RevisionIndex when Revisions is nil.
	Metadata metadata.Interface
	Store    Store
	Sender   EventSender
	Log      *zap.SugaredLogger
	// Namespaces to watch; empty watches all.
	Namespaces []string
	// Revisions is the shared index of release secret metadata (release.NewRevisionIndex
	// over Namespaces); Start builds one when it is nil, and runs it in watch mode.
	Revisions *release.RevisionIndex
	// Workers sending events in parallel; 0 is DefaultWorkers.
	Workers int
	// ProgressInterval rate-limits progress events per revision; 0 sends none.
	ProgressInterval time.Duration
	// SigningKey signs and verifies the marks of reported statuses (reported.go); empty: a
	// trusted run, where the mark alone counts.
	SigningKey signing.Key
	// Since is no later than when the notifiers first ran (history.go, SinceOf): a record
	// never reported that last changed before it is history, not reported. Zero reports every record not marked.
	Since time.Time
	// Clock dates ages and ticks the progress events (nil: the wall clock; tests move a
	// fake one).
	Clock clock.WithTicker
	// Consumed, when set, is the executor's record of consumed requests (tombstones.go).
	Consumed ConsumedRecords
	// ActionLogs, when set, gives failed status events the tail of the action's log.
	ActionLogs LogTails

	// leases caches async-helm's Leases (leases.go).
	leases leaseCache
	// startup is the start-up backlog waiting for its turn (startup.go).
	startup startupFeed

	// queue holds the keys to report, handed out one namespace at a time in turn (fairkeys.go).
	queue workqueue.TypedRateLimitingInterface[string]
	// marks are the secrets whose reported status is to be recorded (watch mode, marks.go):
	// a worker that sent an event goes on to the next one instead of waiting for the
	// compare-and-swap that records it.
	marks workqueue.TypedRateLimitingInterface[string]
	mu    sync.Mutex
	// observed is the last status seen per secret, and backlog the statuses seen but not yet
	// reported, in order: a transition is kept even when the secret moves on while the sink
	// is down, up to MaxBacklog (queueStatus). A rewrite with the same status (adoption) adds
	// nothing.
	observed map[string]string
	backlog  map[string][]string
	// history holds the secrets first seen as history (history.go) and unchanged since:
	// neither reported nor marked.
	history map[string]bool
	// watching: lookups are answered by Revisions (watch mode) rather than by a GET.
	watching bool
	// gone holds the last labels of deleted secrets whose backlog is still to be reported
	// (an uninstall's "uninstalled" names its request).
	gone map[string]release.Revision
	// vanished marks deleted secrets of our pending revisions: their namespace is looked at
	// (vanished.go) before anything is reported.
	vanished map[string]bool
	// graves is where the next page of uncached tombstones starts (tombstones.go).
	graves struct{ namespace, cont string }
	// once logs what a hostile record causes once, not once per retry.
	once logonce.Set
	// charts are the charts read of records without a chart label, by UID (charts.go).
	charts *lru.Cache
}

// DefaultWorkers: a change costs a worker little CPU but the API server's time, mostly
// the compare-and-swap that records it (the whole secret, ~100 KiB for a large release,
// rewritten in etcd: p50 ~100 ms, p90 ~400 ms while Helm rewrites 50 secrets a second).
// With 4 workers, changes queued behind those writes for 0.4 s at p50 (make bench's
// notifier section); 32 keep the queue empty at that rate, and stay far within the
// client's QPS limit (pkg/kube).
const DefaultWorkers = 32

// Init prepares the queue; Run calls it, and so may a caller that enqueues before Run.
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

func (s *Service) namespaces() []string {
	if len(s.Namespaces) == 0 {
		return []string{metav1.NamespaceAll}
	}
	return s.Namespaces
}

// LogTails reads the end of a revision's action log (actionlog.Store.Tail).
type LogTails interface {
	Tail(ctx context.Context, namespace, name string, revision int, requestID string) (string, error)
}

// CachedLease is async-helm's Lease namespace/name as the cache holds it (nil: none
// cached, or no cache); only a Lease it shows alive may be trusted (release.AliveIn).
func (s *Service) CachedLease(namespace, name string) *coordinationv1.Lease {
	return s.leases.get(namespace, name)
}
