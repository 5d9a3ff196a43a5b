package helmexec

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/client-go/rest"
)

// Bounds of a render's `lookup` calls, answered by the parent (Lookups).
const (
	// MaxLookups bounds the API requests of one render (a lookup is a discovery request
	// and a get or list).
	MaxLookups = 2000
	// MaxLookupBytes bounds one answer of the API server to a lookup.
	MaxLookupBytes = 8 << 20
	// maxLookupFrame bounds a lookup's answer as the worker reads it (the body in base64).
	maxLookupFrame = MaxLookupBytes*4/3 + 64<<10
)

// Lookups answers one render's `lookup` calls as the action's identity (its fenced,
// impersonating REST config): reads only, each answer bounded, their number bounded. The
// worker asks them on its own pipes, the ones its job came on, and only while the parent
// runs that job (RenderPool): there is no socket, so no other process, and no other job,
// can ask them.
type Lookups struct {
	cfg   *rest.Config
	count atomic.Int64

	once   sync.Once
	client *http.Client
	err    error
}

// NewLookups answers a render's lookups through cfg.
func NewLookups(cfg *rest.Config) *Lookups { return &Lookups{cfg: cfg} }

// lookupRequest is one API request a worker's template asks (client-go's, as sent).
type lookupRequest struct {
	Method string `json:"method"`
	URI    string `json:"uri"`
	Accept string `json:"accept,omitempty"`
}

// lookupAnswer is the API server's answer to a lookupRequest, or the parent's refusal.
type lookupAnswer struct {
	Status      int    `json:"status"`
	ContentType string `json:"contentType,omitempty"`
	Body        []byte `json:"body,omitempty"`
}

func refusal(status int, format string, args ...any) lookupAnswer {
	return lookupAnswer{Status: status, ContentType: "text/plain; charset=utf-8", Body: []byte(fmt.Sprintf(format, args...))}
}

func (l *Lookups) httpClient() (*http.Client, error) {
	l.once.Do(func() {
		rt, err := rest.TransportFor(l.cfg)
		l.client, l.err = &http.Client{Transport: rt}, err
	})
	return l.client, l.err
}

// answer sends one read on to the API server and returns its answer, bounded.
func (l *Lookups) answer(ctx context.Context, q lookupRequest) lookupAnswer {
	n := l.count.Add(1)
	u, err := url.ParseRequestURI(q.URI)
	switch {
	case q.Method != http.MethodGet:
		return refusal(http.StatusMethodNotAllowed, "a template's lookup may only read")
	case err != nil || u.IsAbs() || u.Host != "" || !strings.HasPrefix(u.Path, "/api"):
		return refusal(http.StatusNotFound, "not an API path")
	case n > MaxLookups:
		return refusal(http.StatusTooManyRequests, "the chart's templates made more than %d API requests (lookup)", MaxLookups)
	}
	c, err := l.httpClient()
	if err != nil {
		return refusal(http.StatusInternalServerError, "%v", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(l.cfg.Host, "/")+u.RequestURI(), nil)
	if err != nil {
		return refusal(http.StatusBadRequest, "%v", err)
	}
	req.Header.Set("Accept", q.Accept)
	a, err := fetch(c, req)
	if err != nil {
		return refusal(http.StatusBadGateway, "%v", err)
	}
	return a
}

// fetch is one request to the API server, its answer read up to MaxLookupBytes.
func fetch(c *http.Client, req *http.Request) (lookupAnswer, error) {
	resp, err := c.Do(req)
	if err != nil {
		return lookupAnswer{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxLookupBytes+1))
	if err != nil {
		return lookupAnswer{}, err
	}
	if len(body) > MaxLookupBytes {
		return lookupAnswer{}, fmt.Errorf("a lookup's answer is over %d MiB", MaxLookupBytes>>20)
	}
	return lookupAnswer{Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), Body: body}, nil
}

// pipeLookups is a worker's transport for its templates' API requests: each is sent to
// the parent on the worker's own pipes and its answer read back, one at a time.
type pipeLookups struct {
	mu  sync.Mutex
	in  *bufio.Reader
	out *bufio.Writer
}

// lookupConfig is the REST config of a worker's `lookup` calls: every request goes to the
// parent, which sends it on as the job's identity.
func lookupConfig(rt http.RoundTripper) *rest.Config {
	return &rest.Config{Host: "http://async-helm-lookup", QPS: -1, Transport: rt}
}

// send writes m to the parent.
func (p *pipeLookups) send(m workerMsg) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return writeFrame(p.out, m)
}

func (p *pipeLookups) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	q := lookupRequest{Method: req.Method, URI: req.URL.RequestURI(), Accept: req.Header.Get("Accept")}
	if err := writeFrame(p.out, workerMsg{Lookup: &q}); err != nil {
		return nil, fmt.Errorf("ask the lookup of the render's parent: %w", err)
	}
	var a lookupAnswer
	if _, err := readFrame(p.in, maxLookupFrame, &a); err != nil {
		return nil, fmt.Errorf("read the lookup's answer: %w", err)
	}
	h := http.Header{}
	if a.ContentType != "" {
		h.Set("Content-Type", a.ContentType)
	}
	return &http.Response{Status: fmt.Sprintf("%d %s", a.Status, http.StatusText(a.Status)), StatusCode: a.Status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h, Request: req,
		Body: io.NopCloser(bytes.NewReader(a.Body)), ContentLength: int64(len(a.Body))}, nil
}
