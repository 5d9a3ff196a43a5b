// Package submitclient is a Go client of submit's HTTP API (the contract in pkg/api).
package submitclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"

	"github.com/async-helm/async-helm/pkg/api"
)

// Client talks to one submit endpoint.
type Client struct {
	Server string
	Token  string
	HTTP   *http.Client
}

// APIError is an error answer of submit.
type APIError struct {
	Status  int
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s (HTTP %d)", e.Message, e.Status)
}

// Install asks for an install; the answer is the reserved release secret.
func (c *Client) Install(ctx context.Context, req api.ReleaseRequest) (*corev1.Secret, error) {
	var sec corev1.Secret
	return &sec, c.do(ctx, http.MethodPost, api.PathAsync, nil, req, &sec)
}

// Upgrade asks for an upgrade.
func (c *Client) Upgrade(ctx context.Context, req api.ReleaseRequest) (*corev1.Secret, error) {
	var sec corev1.Secret
	return &sec, c.do(ctx, http.MethodPut, api.PathAsync, nil, req, &sec)
}

// Get returns the latest revision of a release, with its Progress while it is pending.
func (c *Client) Get(ctx context.Context, ns, name string) (*api.Release, error) {
	var rel api.Release
	if err := c.do(ctx, http.MethodGet, api.PathRelease, url.Values{"ns": {ns}, "name": {name}}, nil, &rel); err != nil {
		return nil, err
	}
	if rel.Release == nil {
		return nil, fmt.Errorf("decode answer of GET %s: no release in it", api.PathRelease)
	}
	return &rel, nil
}

// Cancel stops the pending revision of a release: Status "cancelling" while its executor
// stops it, "failed" when none had started it; nothing pending is an *APIError 409.
func (c *Client) Cancel(ctx context.Context, ns, name string) (*api.Cancelled, error) {
	var out api.Cancelled
	return &out, c.do(ctx, http.MethodPost, api.PathCancel, url.Values{"ns": {ns}, "name": {name}}, nil, &out)
}

// History returns every revision of a release.
func (c *Client) History(ctx context.Context, ns, name string) ([]*helmrelease.Release, error) {
	var rels []*helmrelease.Release
	return rels, c.do(ctx, http.MethodGet, api.PathHistory, url.Values{"ns": {ns}, "name": {name}}, nil, &rels)
}

// List returns the latest revision of every release in ns ("" = all namespaces).
func (c *Client) List(ctx context.Context, ns string) ([]*helmrelease.Release, error) {
	var rels []*helmrelease.Release
	return rels, c.do(ctx, http.MethodGet, api.PathList, url.Values{"ns": {ns}, "limitInfo": {"true"}}, nil, &rels)
}

// ListReleases is List with the queue of pending revisions not started (beside Helm's fields).
func (c *Client) ListReleases(ctx context.Context, ns string) ([]api.Release, error) {
	var rels []api.Release
	return rels, c.do(ctx, http.MethodGet, api.PathList, url.Values{"ns": {ns}, "limitInfo": {"true"}}, nil, &rels)
}

// Diff asks what an install, upgrade or rollback would change (POST /api/helm/release/diff).
func (c *Client) Diff(ctx context.Context, req api.DiffRequest) (*api.Diff, error) {
	var out api.Diff
	return &out, c.do(ctx, http.MethodPost, api.PathDiff, nil, req, &out)
}

// Template is what an install of req would render (CRDs, manifest and hooks), nothing reserved.
func (c *Client) Template(ctx context.Context, req api.ReleaseRequest) (string, error) {
	var out string
	return out, c.do(ctx, http.MethodPost, api.PathTemplate, nil, req, &out)
}

// Log is a release's action log: revision version (0: latest started), lines after after.
func (c *Client) Log(ctx context.Context, ns, name string, version int, after int64) (*api.ActionLog, error) {
	q := url.Values{"ns": {ns}, "name": {name}}
	if version > 0 {
		q.Set("version", strconv.Itoa(version))
	}
	if after > 0 {
		q.Set("after", strconv.FormatInt(after, 10))
	}
	var out api.ActionLog
	return &out, c.do(ctx, http.MethodGet, api.PathLog, q, nil, &out)
}

// Uninstall asks for an uninstall (204); version, when above 0, must be an existing revision.
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

func (c *Client) do(ctx context.Context, method, path string, q url.Values, body, out any) error {
	u := strings.TrimSuffix(c.Server, "/") + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, r)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.client().Do(req)
	if err != nil {
		return fmt.Errorf("submit at %s: %w", c.Server, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return &APIError{Status: resp.StatusCode, Message: fmt.Sprintf(
			"submit answered a redirect to %q, which is not followed (the token would go with it); use that URL", resp.Header.Get("Location"))}
	}
	if resp.StatusCode >= 300 {
		var e api.Error
		if json.Unmarshal(raw, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(raw))
		}
		return &APIError{Status: resp.StatusCode, Message: e.Error}
	}
	if out == nil { // an answer without a body (204)
		return nil
	}
	if text, ok := out.(*string); ok { // an answer that is not JSON (the template's YAML)
		*text = string(raw)
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decode answer of %s %s: %w", method, path, err)
	}
	return nil
}

// client is c.HTTP (or a plain client) that follows no redirect: Go's client keeps the
// Authorization header on a redirect to the same host, even from https to http.
func (c *Client) client() *http.Client {
	hc := http.Client{}
	if c.HTTP != nil {
		hc = *c.HTTP
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &hc
}
