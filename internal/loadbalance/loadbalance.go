// Package loadbalance is a local stand-in for a Knative Service's endpoints: one loopback
// address in front of N instances of a function, each request sent to the next instance in
// turn (round-robin, as Knative spreads requests over a Revision's pods).
//
// It keeps the two behaviours of Knative's data path that faults depend on. An instance that
// refuses the connection (killed, not yet listening) is skipped and the request goes to the
// next one: nothing was sent, so the activator retries it. A request already sent to an
// instance that dies fails (502), as an in-flight request fails on a cluster when its pod is
// killed: the caller (a Trigger's delivery, a client) decides whether to retry.
package loadbalance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Balancer serves one address and forwards each request to one of its instances.
type Balancer struct {
	// URL is the balancer's own address (http://127.0.0.1:port): the Knative Service's.
	URL string

	srv       *http.Server
	transport *http.Transport
	next      atomic.Uint64
	failed    atomic.Int64 // requests that failed after they were sent (in flight on a dead instance)

	mu        sync.Mutex
	instances []*instance
}

// instance is one backend and what it answered.
type instance struct {
	url     *url.URL
	served  atomic.Int64 // requests it answered
	refused atomic.Int64 // connections it refused (the request went to the next instance)
}

// Stats is what one instance got.
type Stats struct {
	URL             string
	Served, Refused int64
}

// errNoInstance answers a request when the balancer has no instance yet.
var errNoInstance = errors.New("no instance")

// Start listens on addr ("127.0.0.1:0" for a free port) and serves until Close. Instances
// are added with Add, once they are started (Knative must know the address first).
func Start(addr string) (*Balancer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("load balancer on %s: %w", addr, err)
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	// Many concurrent deliveries to few instances: keep their connections (the default of 2
	// idle connections per host would open and close one per request under a burst).
	t.MaxIdleConnsPerHost, t.MaxIdleConns = 512, 2048
	t.DialContext = (&net.Dialer{Timeout: 5 * time.Second}).DialContext
	b := &Balancer{URL: "http://" + ln.Addr().String(), transport: t}
	proxy := &httputil.ReverseProxy{
		Rewrite:      func(pr *httputil.ProxyRequest) { pr.Out.URL.Scheme = "http" },
		Transport:    roundRobin{b},
		ErrorHandler: b.fail,
	}
	b.srv = &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = b.srv.Serve(ln) }()
	return b, nil
}

// Add puts an instance (its base URL) behind the balancer.
func (b *Balancer) Add(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return fmt.Errorf("instance address %q: %v", rawURL, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.instances = append(b.instances, &instance{url: u})
	return nil
}

// Stats is what each instance answered and refused so far, in the order they were added.
func (b *Balancer) Stats() []Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Stats, len(b.instances))
	for i, in := range b.instances {
		out[i] = Stats{URL: in.url.String(), Served: in.served.Load(), Refused: in.refused.Load()}
	}
	return out
}

// Failed counts the requests that failed after they were sent, and those no instance took.
func (b *Balancer) Failed() int64 { return b.failed.Load() }

// Close stops serving; requests in flight are cut.
func (b *Balancer) Close() error {
	err := b.srv.Close()
	b.transport.CloseIdleConnections()
	return err
}

func (b *Balancer) snapshot() []*instance {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*instance(nil), b.instances...)
}

// fail answers a request that no instance answered: 503 when none could be reached, 502
// when the one it was sent to failed (Knative's queue-proxy answers these too).
func (b *Balancer) fail(w http.ResponseWriter, r *http.Request, err error) {
	b.failed.Add(1)
	code := http.StatusBadGateway
	if errors.Is(err, errNoInstance) || refused(err) {
		code = http.StatusServiceUnavailable
	}
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return // the caller went away; nobody reads an answer
	}
	http.Error(w, "load balancer: "+err.Error(), code)
}

// roundRobin is the balancer's transport: the next instance, then the following ones while
// they refuse the connection.
type roundRobin struct{ b *Balancer }

func (rr roundRobin) RoundTrip(req *http.Request) (*http.Response, error) {
	instances := rr.b.snapshot()
	if len(instances) == 0 {
		return nil, errNoInstance
	}
	var body *countingBody
	if req.Body != nil && req.Body != http.NoBody {
		body = &countingBody{r: req.Body}
	}
	first := rr.b.next.Add(1) - 1
	var err error
	for i := range instances {
		in := instances[(first+uint64(i))%uint64(len(instances))]
		out := req.Clone(req.Context())
		out.URL.Host = in.url.Host
		if body != nil {
			out.Body = body
		}
		var resp *http.Response
		resp, err = rr.b.transport.RoundTrip(out)
		if err == nil {
			in.served.Add(1)
			return resp, nil
		}
		// Retry only what never left: a refused connection, and nothing of the body read.
		if !refused(err) || (body != nil && body.n.Load() > 0) {
			return nil, err
		}
		in.refused.Add(1)
	}
	return nil, err
}

// refused reports a connection the instance refused: nothing was sent.
func refused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// countingBody is the request's body shared by the attempts: it counts what the transport
// read (a retry is safe only while that is zero) and leaves closing to the server, which
// owns the body (the transport closes a request's body even when the dial failed).
type countingBody struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func (c *countingBody) Close() error { return nil }
