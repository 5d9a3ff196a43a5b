package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"

	"helm.sh/helm/v3/pkg/registry"
)

// fetchOCIWith pulls a chart with Helm's registry client (creds' basic auth to the
// registry's host only) within MaxBytes counted on the wire, cancelled with ctx (Helm's
// Pull takes no context; the transport carries it).
func (s *Source) fetchOCIWith(ctx context.Context, ref Ref, creds *Credentials) ([]byte, error) {
	base := s.client()
	next := base.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	// Manifests and the chart's config are small: 1 MiB on top of the chart itself.
	bounded := &boundedTransport{ctx: ctx, next: next}
	bounded.remaining.Store(s.maxBytes() + 1<<20)
	hc := &http.Client{Transport: bounded, Timeout: base.Timeout, CheckRedirect: base.CheckRedirect}
	opts := []registry.ClientOption{registry.ClientOptHTTPClient(hc)}
	host := strings.SplitN(strings.TrimPrefix(ref.URL, "oci://"), "/", 2)[0]
	if creds != nil {
		opts = append(opts, ociAuthorizer(hc, host, creds))
	}
	for _, h := range s.PlainHTTPRegistries {
		if h == host {
			opts = append(opts, registry.ClientOptPlainHTTP())
		}
	}
	client, err := registry.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: registry client: %v", ErrUnreachable, err)
	}
	target := strings.TrimPrefix(ref.URL, "oci://")
	if ref.Version != "" && !strings.Contains(target[strings.LastIndex(target, "/")+1:], ":") {
		target += ":" + ref.Version
	}
	res, err := client.Pull(target, registry.PullOptWithChart(true))
	switch {
	case bounded.exceeded.Load() || (err == nil && int64(len(res.Chart.Data)) > s.maxBytes()):
		return nil, fmt.Errorf("%w: %s is over %d bytes", ErrTooLarge, ref, s.maxBytes())
	case ctx.Err() != nil:
		return nil, fmt.Errorf("%w: %s: %w", ErrUnreachable, ref, ctx.Err())
	case errors.Is(err, ErrForbiddenHost):
		return nil, fmt.Errorf("%w (%s)", ErrForbiddenHost, ref)
	case err != nil:
		return nil, fmt.Errorf("%w: %s: %v", ErrNotFound, ref, err)
	}
	return res.Chart.Data, nil
}

func isOCI(u string) bool { return strings.HasPrefix(u, "oci://") }

// boundedTransport gives a pull's requests its context and stops past its byte budget.
type boundedTransport struct {
	ctx       context.Context
	next      http.RoundTripper
	remaining atomic.Int64
	exceeded  atomic.Bool
}

func (t *boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.ctx.Err(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(req.Context())
	stop := context.AfterFunc(t.ctx, cancel)
	done := func() { stop(); cancel() }
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		done()
		return nil, err
	}
	resp.Body = &boundedBody{ReadCloser: resp.Body, t: t, done: done}
	return resp, nil
}

type boundedBody struct {
	io.ReadCloser
	t    *boundedTransport
	done func()
}

func (b *boundedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.t.remaining.Add(-int64(n)) < 0 {
		b.t.exceeded.Store(true)
		return n, ErrTooLarge
	}
	return n, err
}

func (b *boundedBody) Close() error {
	err := b.ReadCloser.Close()
	b.done()
	return err
}
