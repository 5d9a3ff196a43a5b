package sweeper

import (
	"context"
	"net/http"
	"sync/atomic"
)

// The sweeper counts the API calls of each pass (PassStats.APICalls): the clients' transport
// (CountingTransport) adds one to the counter the request's context carries. client-go
// sends every request with the context its caller gave, so only the pass's calls count.

type callsKey struct{}

// countCalls is ctx carrying a fresh counter of the API calls made with it.
func countCalls(ctx context.Context) (context.Context, *atomic.Int64) {
	n := &atomic.Int64{}
	return context.WithValue(ctx, callsKey{}, n), n
}

// CountingTransport wraps a Kubernetes client's transport (rest.Config.WrapTransport):
// each request whose context carries a counter adds one to it.
func CountingTransport(rt http.RoundTripper) http.RoundTripper {
	return countingTransport{rt}
}

type countingTransport struct{ next http.RoundTripper }

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if n, ok := r.Context().Value(callsKey{}).(*atomic.Int64); ok {
		n.Add(1)
	}
	return c.next.RoundTrip(r)
}
