package main

import (
	"time"

	"github.com/async-helm/async-helm/pkg/actionlog"
	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/signing"
)

// Config is the executor's environment, read once at start.
type Config struct {
	chartsource.Settings
	actionlog.Config
	Kubeconfig string `envconfig:"KUBECONFIG"`
	// MaxParallel actions held at once, in any phase; more are refused with 429 (redelivered).
	MaxParallel int `envconfig:"MAX_PARALLEL" default:"64"`
	// CPUSlots bounds the actions in their CPU phase (0: GOMAXPROCS); waiting gives the slot back.
	CPUSlots int `envconfig:"CPU_SLOTS" default:"0"`
	// MaxActionTime must stay below the Knative Service's timeoutSeconds, so that an action
	// ends (and is recorded failed) before the platform cuts the request.
	MaxActionTime time.Duration `envconfig:"MAX_ACTION_TIME" default:"55m"`
	LeaseDuration time.Duration `envconfig:"LEASE_DURATION" default:"30s"`
	// SlotWait is the most a delivery waits for an action slot before answering 429; it waits
	// no longer than DeliveryTimeout allows (docs/design.md, "Tenants and shares").
	SlotWait time.Duration `envconfig:"SLOT_WAIT" default:"1h"`
	// DeliveryTimeout is how long the Broker waits for a delivery's answer (its timeoutSeconds).
	DeliveryTimeout time.Duration `envconfig:"DELIVERY_TIMEOUT" default:"60m"`
	// MaxWaitingBytes bounds what the deliveries waiting for a slot hold in memory (each
	// its event three times and 32 KiB); past it the tenant waiting the most is answered 429.
	MaxWaitingBytes int64 `envconfig:"MAX_WAITING_BYTES" default:"134217728"`
	// MaxWaiting bounds the deliveries waiting for a slot at once, below the Knative
	// Service's containerConcurrency less 2 x MAX_PARALLEL, so that every waiting
	// delivery is in the fair queue rather than in the platform's queue before the pod.
	MaxWaiting int `envconfig:"MAX_WAITING" default:"480"`
	// MaxHistory is the revisions kept per release, as helm's --history-max (0: all).
	MaxHistory int `envconfig:"MAX_HISTORY" default:"10"`
	// EventSigningKey verifies accepted events (shared with submit).
	EventSigningKey string        `envconfig:"EVENT_SIGNING_KEY"`
	EventMaxAge     time.Duration `envconfig:"EVENT_MAX_AGE" default:"3h"`
	// Holder names this instance in heartbeat leases (the pod name on Kubernetes).
	Holder string `envconfig:"POD_NAME"`
	// Namespace is async-helm's own namespace (tenants cannot write), where consumed records live.
	Namespace string `envconfig:"ASYNC_HELM_NAMESPACE" default:"async-helm"`
	// RenderTimeout bounds the CPU time of a render (its worker's); past it the action fails.
	RenderTimeout time.Duration `envconfig:"RENDER_TIMEOUT" default:"1m"`
	// RenderWorkers is the number of worker processes that render templates, one chart at a
	// time each, handed out per tenant (up to twice as many live while renders wait on
	// their lookups); 0 is the default.
	RenderWorkers int `envconfig:"RENDER_WORKERS" default:"2"`
	// RenderMemoryMiB bounds each render worker's memory.
	RenderMemoryMiB int64 `envconfig:"RENDER_MEMORY_MIB" default:"256"`
	// HelmEngine is the Helm SDK actions run on: v3 or v4 (docs/deploy.md, "Helm v4").
	HelmEngine string `envconfig:"HELM_ENGINE" default:"v3"`
}

// Validate refuses an unknown engine and a signing key that others could know or guess.
func (c Config) Validate() error {
	if _, err := helmexec.ParseEngine(c.HelmEngine); err != nil {
		return err
	}
	return signing.Key(c.EventSigningKey).Check()
}
