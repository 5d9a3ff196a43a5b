package main

import (
	"time"

	"github.com/async-helm/async-helm/pkg/events"
)

// Config is the notifier's environment, read once at start.
type Config struct {
	events.SinkConfig
	Kubeconfig string `envconfig:"KUBECONFIG"`
	// Namespaces to watch, comma-separated; empty watches all.
	Namespaces []string `envconfig:"NAMESPACES"`
	// Watch with its own metadata informer (default), or take Knative ApiServerSource
	// events (Reference mode, selector owner=helm) on / when false.
	Watch          bool          `envconfig:"WATCH" default:"true"`
	Workers        int           `envconfig:"WORKERS" default:"4"`
	ReaperGrace    time.Duration `envconfig:"REAPER_GRACE" default:"2m"`
	ReaperInterval time.Duration `envconfig:"REAPER_INTERVAL" default:"30s"`
}
