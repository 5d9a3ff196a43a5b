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
}
