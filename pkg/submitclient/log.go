package submitclient

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/async-helm/async-helm/pkg/api"
)

// Log is the log of a release's action: revision version (0: the latest started), the
// lines after sequence number after.
func (c *Client) Log(ctx context.Context, ns, name string, version int, after int64) (*api.ActionLog, error) {
	q := url.Values{"ns": {ns}, "name": {name}}
	if version > 0 {
		q.Set("version", strconv.Itoa(version))
	}
	if after > 0 {
		q.Set("after", strconv.FormatInt(after, 10))
	}
	var out api.ActionLog
	if err := c.do(ctx, http.MethodGet, api.PathLog, q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
