package source

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// A chart named without a namespace (no access review behind it) is fetched without the
// repository's credentials; the same chart named with a namespace gets them.
func TestNamespacelessChartsAreFetchedWithoutCredentials(t *testing.T) {
	tiny := tgz(t, chartYAML("tiny"))
	var mu sync.Mutex
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		_, _ = w.Write(tiny)
	}))
	defer srv.Close()
	src := &Source{HTTP: Policy{AllowLoopback: true}.HTTPClient(10 * time.Second),
		Repositories: map[string]string{"private": srv.URL + "/charts"},
		Credentials:  map[string]Credentials{"private": {Username: "svc", Password: "pw"}}}
	for _, ref := range []Ref{
		{URL: srv.URL + "/charts/tiny.tgz"},
		{URL: srv.URL + "/charts/tiny.tgz", IndexEntry: "tiny--private"},
		{URL: srv.URL + "/charts/tiny.tgz", Namespace: "team-a"},
	} {
		if _, err := src.Get(context.Background(), ref); err != nil {
			t.Fatalf("%+v: %v", ref, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(auth) != 3 || auth[0] != "" || auth[1] != "" || auth[2] == "" {
		t.Errorf("Authorization sent: %q; want none, none (no namespace), then the repository's (namespace team-a)", auth)
	}
}
