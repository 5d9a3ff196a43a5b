package submitclient

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// A redirect is not followed: Go's client keeps the Authorization header on a redirect to
// the same host, so an https endpoint answering 307 to http:// would have the bearer token
// re-sent in clear. The caller gets the Location in the error instead.
func TestRedirectIsNotFollowedWithTheToken(t *testing.T) {
	var leaked atomic.Value
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked.Store(r.Header.Get("Authorization"))
		w.WriteHeader(http.StatusNotFound)
	}))
	defer plain.Close()
	tls := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, plain.URL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	defer tls.Close()

	c := &Client{Server: tls.URL, Token: "secret-token", HTTP: tls.Client()}
	_, err := c.List(ctx(t), "ns")
	if got, _ := leaked.Load().(string); got != "" {
		t.Fatalf("the redirect was followed and carried %q over plain http", got)
	}
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusTemporaryRedirect || !strings.Contains(apiErr.Message, plain.URL) {
		t.Errorf("List = %v; want the 307 with its Location", err)
	}
	if tls.Client().CheckRedirect != nil {
		t.Error("the caller's http.Client was changed")
	}
}
