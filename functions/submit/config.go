package main

import (
	"time"

	"github.com/async-helm/async-helm/pkg/events"
)

// Config is submit's environment, read once at start.
type Config struct {
	events.SinkConfig
	Kubeconfig string `envconfig:"KUBECONFIG"`
	// ChartRepositories lists the repositories of index entries: "name=url,name=url".
	ChartRepositories string        `envconfig:"CHART_REPOSITORIES"`
	ChartCacheTTL     time.Duration `envconfig:"CHART_CACHE_TTL" default:"10m"`
	// Authentication (TokenReview, console cookie + CSRF) and authorization
	// (SubjectAccessReview) of every request. Off only for a trusted local run.
	Authentication bool `envconfig:"AUTHENTICATION" default:"true"`
	// EventSigningKey signs accepted events for the executor (from a Secret).
	EventSigningKey string `envconfig:"EVENT_SIGNING_KEY"`
	// Chart hosts on loopback or private addresses are refused unless allowed.
	AllowLoopbackCharts bool `envconfig:"ALLOW_LOOPBACK_CHARTS"`
	AllowPrivateCharts  bool `envconfig:"ALLOW_PRIVATE_CHARTS"`
	// AllowChartAddresses are ip:port chart hosts allowed whatever their range.
	AllowChartAddresses []string `envconfig:"ALLOW_CHART_ADDRESSES"`
}
