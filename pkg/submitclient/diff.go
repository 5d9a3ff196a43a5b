package submitclient

import (
	"context"
	"net/http"

	"github.com/async-helm/async-helm/pkg/api"
)

// Diff asks what an install, upgrade or rollback would change (POST /api/helm/release/diff).
func (c *Client) Diff(ctx context.Context, req api.DiffRequest) (*api.Diff, error) {
	var out api.Diff
	if err := c.do(ctx, http.MethodPost, api.PathDiff, nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
