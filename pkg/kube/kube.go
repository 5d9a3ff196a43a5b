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

// Open builds the clients. The QPS limits are raised: submit's path to 201 must not wait
// on client-go's default 5 requests/s.
func Open(kubeconfig string) (*Clients, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubernetes config: %w", err)
	}
	return FromConfig(cfg)
}

// FromConfig builds the clients of a REST config, with raised QPS limits.
func FromConfig(cfg *rest.Config) (*Clients, error) {
	cfg.QPS, cfg.Burst = 500, 1000
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
