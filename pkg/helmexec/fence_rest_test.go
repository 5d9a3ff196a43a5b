package helmexec

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/rest"
)

// A render's `lookup` reaches the API server through the action's REST config, not its kube
// client: once the action ended, those calls are refused before they leave the process.
func TestEndedActionsRESTCallsAreRefused(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	fence := &Fence{}
	cfg := &rest.Config{Host: srv.URL}
	fence.guardREST(cfg)
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	get := func() error {
		resp, err := client.Get(srv.URL + "/api/v1/namespaces/ns/configmaps")
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(); err != nil || hits.Load() != 1 {
		t.Fatalf("a call of a running action: %v (%d hits)", err, hits.Load())
	}
	fence.End()
	if err := get(); !errors.Is(err, ErrActionEnded) || hits.Load() != 1 {
		t.Fatalf("a call after the action ended: %v (%d hits), want ErrActionEnded and no hit", err, hits.Load())
	}
}
