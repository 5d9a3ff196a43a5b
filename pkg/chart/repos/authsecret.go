package repos

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
)

// ReviewedAuthSecrets read the basic auth Secret a chart by URL names (the console's
// basic_auth_secret_name) for submit: the caller in the context must be allowed to get it
// (MayGet, an access review) before submit reads it with its own rights, as submit does for
// every Secret whose contents a fetch would send. A context without a caller is refused;
// an empty caller (authentication off) reads as submit.
type ReviewedAuthSecrets struct {
	Client kubernetes.Interface
	// MayGet answers whether the caller may get Secret name of namespace (nil: no reviews,
	// authentication off).
	MayGet func(ctx context.Context, c chartsource.Caller, namespace, name string) error
}

// ReadAuthSecret implements chartsource.AuthSecretReader.
func (r ReviewedAuthSecrets) ReadAuthSecret(ctx context.Context, namespace, name string) (chartsource.Credentials, error) {
	caller, ok := chartsource.CallerFrom(ctx)
	if !ok {
		return chartsource.Credentials{}, fmt.Errorf("%w: Secret %s/%s: no caller to read it for", chartsource.ErrCredentialsRefused, namespace, name)
	}
	if caller.User != "" && r.MayGet != nil {
		if err := r.MayGet(ctx, caller, namespace, name); err != nil {
			return chartsource.Credentials{}, fmt.Errorf("basic auth Secret %s/%s; nothing was fetched with it: %w", namespace, name, err)
		}
	}
	return readAuthSecret(ctx, r.Client, namespace, name)
}

// ReadAuthSecret reads a chart's basic auth Secret impersonating the caller in the context
// (the executor's fetch, long after submit's review): one who may not read it now gets
// ErrCredentialsRefused and nothing is fetched with it.
func (c CallerChecked) ReadAuthSecret(ctx context.Context, namespace, name string) (chartsource.Credentials, error) {
	caller, ok := chartsource.CallerFrom(ctx)
	if !ok {
		return chartsource.Credentials{}, fmt.Errorf("%w: Secret %s/%s: no caller to read it as", chartsource.ErrCredentialsRefused, namespace, name)
	}
	client, err := c.AsCaller(caller)
	if err != nil {
		return chartsource.Credentials{}, fmt.Errorf("%w: Secret %s/%s: %w", chartsource.ErrCredentialsRefused, namespace, name, err)
	}
	creds, err := readAuthSecret(ctx, client, namespace, name)
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		return creds, fmt.Errorf("%w: caller %q may not read basic auth Secret %s/%s; nothing was fetched with it: %w",
			chartsource.ErrCredentialsRefused, caller.User, namespace, name, err)
	}
	return creds, err
}

// readAuthSecret reads the keys username and password of a Secret with client.
func readAuthSecret(ctx context.Context, client kubernetes.Interface, namespace, name string) (chartsource.Credentials, error) {
	sec, err := client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return chartsource.Credentials{}, fmt.Errorf("%w: Secret %s/%s not found", chartsource.ErrAuthSecret, namespace, name)
	case err != nil:
		return chartsource.Credentials{}, fmt.Errorf("read basic auth Secret %s/%s: %w", namespace, name, err)
	}
	return chartsource.CredentialsFromSecret(namespace, name, sec.Data)
}
