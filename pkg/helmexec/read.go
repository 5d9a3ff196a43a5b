package helmexec

import (
	"errors"
	"fmt"

	"helm.sh/helm/v3/pkg/action"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"

	"github.com/async-helm/async-helm/pkg/release"
)

// List returns the latest revision of every release in namespace ("" = all), in every status.
func (f *Factory) List(namespace string) ([]*helmrelease.Release, error) {
	cfg, err := f.Configuration(namespace)
	if err != nil {
		return nil, err
	}
	l := action.NewList(cfg)
	l.All = true
	l.AllNamespaces = namespace == ""
	l.SetStateMask()
	rels, err := l.Run()
	if err != nil {
		return nil, fmt.Errorf("list releases: %w", err)
	}
	return rels, nil
}

// History returns every revision of a release, oldest first.
func (f *Factory) History(namespace, name string) ([]*helmrelease.Release, error) {
	cfg, err := f.Configuration(namespace)
	if err != nil {
		return nil, err
	}
	rels, err := action.NewHistory(cfg).Run(name)
	if errors.Is(err, driver.ErrReleaseNotFound) || (err == nil && len(rels) == 0) {
		return nil, fmt.Errorf("%w: %s/%s", release.ErrNotFound, namespace, name)
	}
	if err != nil {
		return nil, fmt.Errorf("history of %s/%s: %w", namespace, name, err)
	}
	return rels, nil
}

// Latest returns the latest revision of a release, whatever its status.
func (f *Factory) Latest(namespace, name string) (*helmrelease.Release, error) {
	rels, err := f.History(namespace, name)
	if err != nil {
		return nil, err
	}
	latest := rels[0]
	for _, r := range rels {
		if r.Version > latest.Version {
			latest = r
		}
	}
	return latest, nil
}
