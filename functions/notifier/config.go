package main

import (
	"cmp"
	"time"

	"github.com/async-helm/async-helm/pkg/actionlog"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/signing"
)

// Config is the notifier's environment, read once at start.
type Config struct {
	events.SinkConfig
	actionlog.Config
	Kubeconfig string `envconfig:"KUBECONFIG"`
	// Namespaces to watch, comma-separated; empty watches all.
	Namespaces []string `envconfig:"NAMESPACES"`
	// Watch with its own metadata informer, or take ApiServerSource events on / (false).
	Watch   bool `envconfig:"WATCH" default:"true"`
	Workers int  `envconfig:"WORKERS" default:"32"` // notifier.DefaultWorkers
	// The sweeper (docs/design.md, "A 201 is a promise").
	SweepInterval time.Duration `envconfig:"SWEEP_INTERVAL" default:"10s"`
	RedriveAfter  time.Duration `envconfig:"REDRIVE_AFTER" default:"2m"`
	ReaperGrace   time.Duration `envconfig:"REAPER_GRACE" default:"2m"`
	QueueDeadline time.Duration `envconfig:"QUEUE_DEADLINE" default:"1h"`
	// MaxRedrivesPerPass bounds a sweep pass's re-sends (0: none): a backlog of 10,000 is
	// re-sent at 5 a second, about one executor's pace, not in one pass of API calls.
	MaxRedrivesPerPass int `envconfig:"MAX_REDRIVES_PER_PASS" default:"50"`
	// RedriveSink is where re-sent accepted events go (the Broker); empty: K_SINK.
	RedriveSink string `envconfig:"REDRIVE_SINK"`
	// ProgressInterval: at most one progress event per revision this often (0: none).
	ProgressInterval time.Duration `envconfig:"PROGRESS_INTERVAL" default:"2s"`
	// EventSigningKey verifies dead letters: only events submit signed are acted on.
	EventSigningKey string        `envconfig:"EVENT_SIGNING_KEY"`
	EventMaxAge     time.Duration `envconfig:"EVENT_MAX_AGE" default:"3h"`
	// OwnNamespace is async-helm's own namespace, where the executor records consumed requests.
	OwnNamespace string `envconfig:"ASYNC_HELM_NAMESPACE" default:"async-helm"`
	// Leader election (docs/design.md, "Two or more notifiers"): the holder of ElectionName sweeps.
	LeaderElection      bool          `envconfig:"LEADER_ELECTION" default:"true"`
	LeaderElectionName  string        `envconfig:"LEADER_ELECTION_NAME"`
	LeaderLeaseDuration time.Duration `envconfig:"LEADER_LEASE_DURATION" default:"15s"`
	LeaderRenewDeadline time.Duration `envconfig:"LEADER_RENEW_DEADLINE" default:"10s"`
	LeaderRetryPeriod   time.Duration `envconfig:"LEADER_RETRY_PERIOD" default:"2s"`
	// PodName names this pod in the election (Knative's pods have it as HOSTNAME).
	PodName string `envconfig:"HOSTNAME"`
}

// Validate refuses a signing key that others could know or guess.
func (c Config) Validate() error {
	return signing.Key(c.EventSigningKey).Check()
}

// ElectionName is the Lease the notifier's pods elect their sweeper on: LEADER_ELECTION_NAME
// (one per stack sharing the namespace), else async-helm-notifier, the name the Role allows.
func (c Config) ElectionName() string { return cmp.Or(c.LeaderElectionName, "async-helm-notifier") }
