package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/api"
)

// A synchronous install whose wait ends first answers 504 as an API error that says the
// request goes on and where to follow it (no executor runs here: it stays pending).
func TestSyncInstallAnswers504WhenTheWaitEndsFirst(t *testing.T) {
	s := newStackWith(t, func(c *Config) { c.SyncTimeout = 300 * time.Millisecond })
	ns := cluster.Namespace(t)

	var e api.Error
	code, hdr := s.call(t, http.MethodPost, api.PathRelease, s.install("web", ns), &e)
	if code != http.StatusGatewayTimeout {
		t.Fatalf("got %d %q, want 504", code, e.Error)
	}
	if hdr.Get("Content-Type") != "application/json" {
		t.Errorf("Content-Type %q", hdr.Get("Content-Type"))
	}
	if want := "it was accepted and goes on: follow GET /api/helm/release?name=web&ns=" + ns; !strings.HasSuffix(e.Error, want) {
		t.Errorf("error %q, want it to end with %q", e.Error, want)
	}
	if _, err := cluster.Client.CoreV1().Secrets(ns).Get(context.Background(), "sh.helm.release.v1.web.v1", metav1.GetOptions{}); err != nil {
		t.Errorf("the reservation is not kept: %v", err)
	}
}

// A synchronous install whose revision disappears (an atomic install Helm uninstalled)
// answers 502 with the console's words.
func TestSyncInstallAnswers502WhenItsRevisionIsGone(t *testing.T) {
	s := newStackWith(t, func(c *Config) { c.SyncTimeout = time.Minute })
	ns := cluster.Namespace(t)
	type answer struct {
		code int
		body api.Error
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		var a answer
		raw, _ := json.Marshal(s.install("web", ns))
		req, _ := http.NewRequest(http.MethodPost, s.url+api.PathRelease, bytes.NewReader(raw))
		req.Header.Set("Authorization", "Bearer "+s.token)
		resp, err := http.DefaultClient.Do(req)
		if a.err = err; err == nil {
			defer resp.Body.Close()
			a.code, a.err = resp.StatusCode, json.NewDecoder(resp.Body).Decode(&a.body)
		}
		done <- a
	}()
	// Once its event is sent, submit only waits: take the reservation away as a failed
	// atomic install does.
	s.sink.WaitFor(t, 30*time.Second, "the install's event", func(e []cloudevents.Event) bool { return len(e) > 0 })
	if err := cluster.Client.CoreV1().Secrets(ns).Delete(context.Background(), "sh.helm.release.v1.web.v1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	a := <-done
	want := "Failed to install helm chart: revision 1 of " + ns + "/web is gone"
	if a.err != nil || a.code != http.StatusBadGateway || !strings.HasPrefix(a.body.Error, want) {
		t.Errorf("got %d %q (%v), want 502 %q...", a.code, a.body.Error, a.err, want)
	}
}
