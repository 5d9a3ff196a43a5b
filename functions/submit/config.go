package main

import (
	"time"

	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/signing"
)

// Config is submit's environment, read once at start.
type Config struct {
	events.SinkConfig
	chartsource.Settings
	Kubeconfig    string        `envconfig:"KUBECONFIG"`
	ChartCacheTTL time.Duration `envconfig:"CHART_CACHE_TTL" default:"10m"`
	// Authentication (TokenReview, console cookie + CSRF) and authorization
	// (SubjectAccessReview) of every request. Off only for a trusted local run.
	Authentication bool `envconfig:"AUTHENTICATION" default:"true"`
	// EventSigningKey signs accepted events for the executor (from a Secret).
	EventSigningKey string `envconfig:"EVENT_SIGNING_KEY"`
	// MaxQueued and MaxQueuedPerNamespace bound the requests accepted and not consumed,
	// counted per tenant in the ledger (docs/design.md, "Tenants and shares"); past them
	// submit answers 429 with Retry-After and reserves nothing.
	MaxQueued             int `envconfig:"MAX_QUEUED" default:"2000"`
	MaxQueuedPerNamespace int `envconfig:"MAX_QUEUED_PER_NAMESPACE" default:"1000"`
	// MaxRetained bounds the requests whose consumed records are kept (EventMaxAge + 1 h),
	// per tenant share; 0: no bound.
	MaxRetained int           `envconfig:"MAX_RETAINED" default:"20000"`
	EventMaxAge time.Duration `envconfig:"EVENT_MAX_AGE" default:"3h"`
	// QueueDeadline is the sweeper's (the notifier's QUEUE_DEADLINE): a ledger entry counts
	// no longer than it and LedgerGrace, when what never started has been failed.
	QueueDeadline time.Duration `envconfig:"QUEUE_DEADLINE" default:"1h"`
	LedgerGrace   time.Duration `envconfig:"LEDGER_GRACE" default:"10m"`
	// SendQueue and SendWorkers size the sends behind the 201 while the sink answers
	// (events.Handoff; docs/design.md, "The reservation contract"). SendQueue 0: every send
	// on the request's path.
	SendQueue   int `envconfig:"SEND_QUEUE" default:"1024"`
	SendWorkers int `envconfig:"SEND_WORKERS" default:"64"`
	// SyncTimeout bounds how long the console's synchronous routes (POST/PUT/PATCH/DELETE
	// /api/helm/release) wait for the accepted action to end; then 504, the action goes on.
	SyncTimeout time.Duration `envconfig:"SYNC_TIMEOUT" default:"5m"`
	// ChartIndexCacheBytes bounds the parsed repository indexes kept (estimated, LRU),
	// ChartIndexMaxBytes one; unset or 0: bounds.IndexCacheBytes and bounds.MaxIndexCost.
	ChartIndexCacheBytes int64 `envconfig:"CHART_INDEX_CACHE_BYTES"`
	ChartIndexMaxBytes   int64 `envconfig:"CHART_INDEX_MAX_BYTES"`
	// Namespace is async-helm's own, where submit binds each accepted request to its
	// reservation (tenants cannot write there).
	Namespace string `envconfig:"ASYNC_HELM_NAMESPACE" default:"async-helm"`
}

// Validate refuses a configuration the function must not start with: a signing key that
// others could know or guess would let anyone sign events.
func (c Config) Validate() error {
	return signing.Key(c.EventSigningKey).Check()
}
