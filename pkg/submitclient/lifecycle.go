package submitclient

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/async-helm/async-helm/pkg/api"
)

// Uninstall asks for an uninstall of release name (the console's async route, 204): the
// latest revision is marked uninstalling, and the release is gone when the executor is done.
// version, when above 0, must name an existing revision.
func (c *Client) Uninstall(ctx context.Context, ns, name string, version int, opts ...api.UninstallOptions) error {
	q := url.Values{"ns": {ns}, "name": {name}}
	if version > 0 {
		q.Set("version", strconv.Itoa(version))
	}
	for _, o := range opts {
		o.Query(q)
	}
	return c.do(ctx, http.MethodDelete, api.PathAsync, q, nil, nil)
}

// Rollback asks for a rollback; the answer is the reserved (pending-rollback) release secret.
func (c *Client) Rollback(ctx context.Context, req api.RollbackRequest) (*corev1.Secret, error) {
	var sec corev1.Secret
	return &sec, c.do(ctx, http.MethodPatch, api.PathAsync, nil, req, &sec)
}
