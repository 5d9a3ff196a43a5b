package main

import "time"

// Config is the executor's environment, read once at start.
type Config struct {
	Kubeconfig string `envconfig:"KUBECONFIG"`
	// ChartRepositories lists the repositories of index entries: "name=url,name=url".
	ChartRepositories string `envconfig:"CHART_REPOSITORIES"`
	// MaxParallel actions; more events are refused with 429 so the broker redelivers them.
	MaxParallel int `envconfig:"MAX_PARALLEL" default:"4"`
	// MaxActionTime must stay below the Knative Service's timeoutSeconds, so that an action
	// ends (and is recorded failed) before the platform cuts the request.
	MaxActionTime time.Duration `envconfig:"MAX_ACTION_TIME" default:"55m"`
	LeaseDuration time.Duration `envconfig:"LEASE_DURATION" default:"30s"`
	// EventSigningKey verifies accepted events (shared with submit, from a Secret); when set,
	// unsigned, altered and stale events are rejected without running Helm.
	EventSigningKey string        `envconfig:"EVENT_SIGNING_KEY"`
	EventMaxAge     time.Duration `envconfig:"EVENT_MAX_AGE" default:"3h"`
	// Chart hosts on loopback or private addresses are refused unless allowed.
	AllowLoopbackCharts bool `envconfig:"ALLOW_LOOPBACK_CHARTS"`
	AllowPrivateCharts  bool `envconfig:"ALLOW_PRIVATE_CHARTS"`
	// AllowChartAddresses are ip:port chart hosts allowed whatever their range.
	AllowChartAddresses []string `envconfig:"ALLOW_CHART_ADDRESSES"`
	// Holder names this instance in heartbeat leases (the pod name on Kubernetes).
	Holder string `envconfig:"POD_NAME"`
}
