// Package kube opens the clients every function needs, from a kubeconfig path or, when
// it is empty, the pod's in-cluster service account.
package kube

import (
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Clients are the typed and metadata-only clients of one cluster.
type Clients struct {
	Config   *rest.Config
	Typed    kubernetes.Interface
	Metadata metadata.Interface
}

// Limits are client-go's client-side rate limit: a token bucket of QPS per second and
// Burst tokens, shared by every request of one client. A QPS below zero is no limit.
type Limits struct {
	QPS   float32
	Burst int
}

// Raised is the limit of the executor, the notifier and the tools: far above client-go's
// default 5/s, still a governor on a client whose work grows with what it runs (waits,
// sweeps).
var Raised = Limits{QPS: 500, Burst: 1000}

// Unlimited is submit's: every accepted request makes a create (its reservation), and a
// client-side bucket would queue them inside submit in front of an API server with room.
// The API server's own priority and fairness is the limit that counts; client-go retries
// its 429s.
var Unlimited = Limits{QPS: -1}

// Open builds the clients of a kubeconfig (in-cluster when empty), with Raised limits
// unless others are given.
func Open(kubeconfig string, limits ...Limits) (*Clients, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubernetes config: %w", err)
	}
	return FromConfig(cfg, limits...)
}

// FromConfig builds the clients of a REST config, with Raised limits unless others are given.
func FromConfig(cfg *rest.Config, limits ...Limits) (*Clients, error) {
	l := Raised
	if len(limits) > 0 {
		l = limits[0]
	}
	cfg.QPS, cfg.Burst = l.QPS, l.Burst
	// No gzip between a function and its API server (same cluster network): the API server
	// gzips watch streams and large lists for a client that accepts it, and the CPU that
	// costs both ends (5% of submit's CPU in gunzip alone) is dearer than the bytes.
	cfg.DisableCompression = true
	typed, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("metadata client: %w", err)
	}
	return &Clients{Config: cfg, Typed: typed, Metadata: md}, nil
}

// Impersonating is a client of cfg acting as as; an empty UserName (a trusted local run)
// keeps cfg's own identity.
func Impersonating(cfg *rest.Config, as rest.ImpersonationConfig) (kubernetes.Interface, error) {
	cc := rest.CopyConfig(cfg)
	if as.UserName != "" {
		cc.Impersonate = as
	}
	cs, err := kubernetes.NewForConfig(cc)
	if err != nil {
		return nil, fmt.Errorf("client impersonating %q: %w", as.UserName, err)
	}
	return cs, nil
}
