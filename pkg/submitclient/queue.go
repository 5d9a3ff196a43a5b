package submitclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/async-helm/async-helm/pkg/api"
)

// ListReleases is List with what submit answers beside Helm's fields: the queue of a
// pending revision no executor has started yet.
func (c *Client) ListReleases(ctx context.Context, ns string) ([]api.Release, error) {
	var rels []api.Release
	return rels, c.do(ctx, http.MethodGet, api.PathList, url.Values{"ns": {ns}, "limitInfo": {"true"}}, nil, &rels)
}
