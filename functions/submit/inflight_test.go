package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/async-helm/async-helm/pkg/auth"
	"github.com/async-helm/async-helm/pkg/function"
)

// Installs with values at api.MaxValueNodes (99,003 JSON values, 258 KiB) that wait in submit
// (a slow chart server): each would hold ~10 MiB decoded, and 50 of one tenant took submit to
// 862 MiB of its 512 Mi. Each is charged what its body decodes to before it is decoded: past
// its tenant's share the next is answered 429, and another tenant's is still admitted.
func TestRequestsInFlightAreBoundedPerTenant(t *testing.T) {
	f := New(Config{}, zap.NewNop().Sugar(), nil)
	entered, release := make(chan struct{}, 16), make(chan struct{})
	h := f.inFlight(func(w http.ResponseWriter, r *http.Request) error {
		entered <- struct{}{}
		<-release // waiting for a fetch slot, its body decoded
		return nil
	})
	body := `{"name":"web","namespace":"%s","chart_url":"https://slow.example/c.tgz","values":{"x":[` +
		strings.Repeat(`{"a":0},`, 33_000) + `{}]}}`
	results := make(chan error, 16)
	send := func(ns, user string) {
		r := httptest.NewRequest(http.MethodPost, "/api/helm/release/async", strings.NewReader(strings.Replace(body, "%s", ns, 1)))
		r = r.WithContext(context.WithValue(r.Context(), userKey{}, &auth.User{Name: user}))
		results <- h(httptest.NewRecorder(), r)
	}
	admitted := 0
	var refused error
	for refused == nil && admitted < 16 {
		go send("team-a", "dev")
		select {
		case <-entered:
			admitted++
		case refused = <-results:
		}
	}
	var status *function.StatusError
	if !errors.As(refused, &status) || status.Code != http.StatusTooManyRequests {
		t.Fatalf("%d of one tenant's installs at the values' bound held in flight, then %v; want 429 past its share", admitted, refused)
	}
	t.Logf("one tenant: %d held, then %v", admitted, refused)
	go send("team-b", "bob")
	select {
	case <-entered:
	case err := <-results:
		t.Fatalf("another tenant's install: %v", err)
	}
	close(release)
	for range admitted + 1 {
		if err := <-results; err != nil {
			t.Errorf("an admitted request: %v", err)
		}
	}
	if n := f.room.Used(); n != 0 {
		t.Errorf("%d bytes held once every request ended", n)
	}
}
