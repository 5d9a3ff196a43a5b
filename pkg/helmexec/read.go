package helmexec

import (
	"context"
	"errors"
	"fmt"

	"helm.sh/helm/v3/pkg/action"
	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

// List returns the latest revision of every release in namespace ("" = all), in every status.
func (f *Factory) List(ctx context.Context, namespace string, opts ...Option) ([]*helmrelease.Release, error) {
	cfg, err := f.Configuration(namespace, withContext(ctx, opts)...)
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
func (f *Factory) History(ctx context.Context, namespace, name string, opts ...Option) ([]*helmrelease.Release, error) {
	cfg, err := f.Configuration(namespace, withContext(ctx, opts)...)
	if err != nil {
		return nil, err
	}
	rels, err := action.NewHistory(cfg).Run(name)
	if errors.Is(err, storage.ErrReleaseNotFound) || (err == nil && len(rels) == 0) {
		return nil, fmt.Errorf("%w: %s/%s", release.ErrNotFound, namespace, name)
	}
	if err != nil {
		return nil, fmt.Errorf("history of %s/%s: %w", namespace, name, err)
	}
	return rels, nil
}

// Latest returns the latest revision of a release, whatever its status.
func (f *Factory) Latest(ctx context.Context, namespace, name string, opts ...Option) (*helmrelease.Release, error) {
	rels, err := f.History(ctx, namespace, name, opts...)
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

// withContext makes Helm's Secrets driver, which calls the API server with
// context.Background, use the caller's context: a read ends with its request.
func withContext(ctx context.Context, opts []Option) []Option {
	return append([]Option{WithSecretsClient(func(si typedcorev1.SecretInterface) typedcorev1.SecretInterface {
		return ctxSecrets{SecretInterface: si, ctx: ctx}
	})}, opts...)
}

type ctxSecrets struct {
	typedcorev1.SecretInterface
	ctx context.Context
}

func (c ctxSecrets) Get(_ context.Context, name string, o metav1.GetOptions) (*corev1.Secret, error) {
	return c.SecretInterface.Get(c.ctx, name, o)
}

func (c ctxSecrets) List(_ context.Context, o metav1.ListOptions) (*corev1.SecretList, error) {
	return c.SecretInterface.List(c.ctx, o)
}
