package testcharts

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

// AuthServer serves the charts of testdata/charts behind basic auth on loopback: a chart
// server outside any chart repository object, for noRepo installs with
// basic_auth_secret_name.
type AuthServer struct {
	URL                string
	Username, Password string
	// Refused counts requests without the right credentials (401), Served the others.
	Refused, Served atomic.Int64
}

// StartBasicAuth serves testdata/charts behind username and password until the test ends.
func StartBasicAuth(t testing.TB, username, password string) *AuthServer {
	t.Helper()
	inner := Start(t)
	target, err := url.Parse(inner.URL)
	if err != nil {
		t.Fatal(err)
	}
	a := &AuthServer{Username: username, Password: password}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != username || p != password {
			a.Refused.Add(1)
			w.Header().Set("WWW-Authenticate", `Basic realm="charts"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		a.Served.Add(1)
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	a.URL = srv.URL
	return a
}

// ChartURL is the URL of a chart archive behind the basic auth, e.g. ChartURL("tiny", "0.1.0").
func (a *AuthServer) ChartURL(name, version string) string {
	return strings.TrimSuffix(a.URL, "/") + "/" + name + "-" + version + ".tgz"
}
