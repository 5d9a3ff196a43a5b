package helmexec

import (
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Client is a Kubernetes client with the options' identity (impersonation): what the
// executor reads about a release's objects while Helm runs, with the caller's rights.
func (f *Factory) Client(opts ...Option) (kubernetes.Interface, error) {
	o := optionsOf(opts)
	cs, err := kubernetes.NewForConfig(f.restAs(&o))
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return cs, nil
}

// restAs is the factory's REST config as the options' identity (impersonation).
func (f *Factory) restAs(o *configOptions) *rest.Config {
	cfg := rest.CopyConfig(f.rest)
	if o.impersonate != nil {
		cfg.Impersonate = *o.impersonate
	}
	return cfg
}
