package submitclient

import (
	"context"
	"net/http"

	"github.com/async-helm/async-helm/pkg/api"
)

// Template is what an install of req would render (POST /api/helm/template): the CRDs,
// manifest and hooks as YAML text, nothing reserved.
func (c *Client) Template(ctx context.Context, req api.ReleaseRequest) (string, error) {
	var out string
	if err := c.do(ctx, http.MethodPost, api.PathTemplate, nil, req, &out); err != nil {
		return "", err
	}
	return out, nil
}
