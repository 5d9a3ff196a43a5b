package helmexec

import (
	"context"

	helmrelease "helm.sh/helm/v3/pkg/release"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/async-helm/async-helm/pkg/release/storage"
)

// writeHook is a storage driver that lets before change each record Helm writes.
type writeHook struct {
	storage.Driver
	before func(key string, rls *helmrelease.Release)
}

func beforeWrite(before func(key string, rls *helmrelease.Release)) Option {
	return WithStorageWrapper(func(d storage.Driver) storage.Driver { return writeHook{Driver: d, before: before} })
}

func (w writeHook) Create(key string, rls *helmrelease.Release) error {
	w.before(key, rls)
	return w.Driver.Create(key, rls)
}

func (w writeHook) Update(key string, rls *helmrelease.Release) error {
	w.before(key, rls)
	return w.Driver.Update(key, rls)
}

// secretsHook is a Secrets client under Helm's driver that sees what the driver reads and
// changes what it writes: got sees each Secret a Get answers, listed each a List answers,
// write each a Create or Update sends (nil: nothing).
type secretsHook struct {
	typedcorev1.SecretInterface
	got, listed func(*corev1.Secret)
	write       func(*corev1.Secret) error
}

func withSecretsHook(h secretsHook) Option {
	return WithSecretsClient(func(si typedcorev1.SecretInterface) typedcorev1.SecretInterface {
		h.SecretInterface = si
		return h
	})
}

func (s secretsHook) Get(ctx context.Context, name string, o metav1.GetOptions) (*corev1.Secret, error) {
	sec, err := s.SecretInterface.Get(ctx, name, o)
	if err == nil && s.got != nil {
		s.got(sec)
	}
	return sec, err
}

func (s secretsHook) List(ctx context.Context, o metav1.ListOptions) (*corev1.SecretList, error) {
	l, err := s.SecretInterface.List(ctx, o)
	if err == nil && s.listed != nil {
		for i := range l.Items {
			s.listed(&l.Items[i])
		}
	}
	return l, err
}

func (s secretsHook) Create(ctx context.Context, sec *corev1.Secret, o metav1.CreateOptions) (*corev1.Secret, error) {
	if err := s.writing(sec); err != nil {
		return nil, err
	}
	return s.SecretInterface.Create(ctx, sec, o)
}

func (s secretsHook) Update(ctx context.Context, sec *corev1.Secret, o metav1.UpdateOptions) (*corev1.Secret, error) {
	if err := s.writing(sec); err != nil {
		return nil, err
	}
	return s.SecretInterface.Update(ctx, sec, o)
}

func (s secretsHook) writing(sec *corev1.Secret) error {
	if s.write == nil {
		return nil
	}
	return s.write(sec)
}
