package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/operator"
	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
)

// Two callers post request events at once: each event is judged by the token on its own
// HTTP request, never by another request's identity, and every request is answered.
func TestConcurrentRequestEventsAreJudgedByTheirOwnCaller(t *testing.T) {
	s := newStack(t)
	ns := cluster.Namespace(t)
	client := &http.Client{Timeout: time.Minute}
	const n = 500
	var adminOK, devForbidden atomic.Int64
	var mu sync.Mutex
	wrong := []string{}
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			token, who := cluster.Operator.BearerToken, "admin" // a cluster admin by RBAC: submit refuses system:masters
			if i%2 == 1 {
				token, who = cluster.Dev.BearerToken, "dev"
			}
			e := cloudevents.NewEvent()
			e.SetID(fmt.Sprintf("req-%d", i))
			e.SetSource("/pipeline")
			e.SetType(events.TypeInstallRequested)
			_ = e.SetData(cloudevents.ApplicationJSON, s.install(fmt.Sprintf("r%d", i), ns))
			req, err := cehttp.NewHTTPRequestFromEvent(context.Background(), s.url+api.PathEvents, e)
			if err != nil {
				t.Error(err)
				return
			}
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := client.Do(req)
			if err != nil {
				mu.Lock()
				wrong = append(wrong, fmt.Sprintf("%s request %d unanswered: %v", who, i, err))
				mu.Unlock()
				return
			}
			resp.Body.Close()
			switch {
			case who == "admin" && resp.StatusCode == http.StatusCreated:
				adminOK.Add(1)
			case who == "dev" && resp.StatusCode == http.StatusForbidden:
				devForbidden.Add(1)
			default:
				mu.Lock()
				wrong = append(wrong, fmt.Sprintf("%s request %d: %d", who, i, resp.StatusCode))
				mu.Unlock()
			}
		}(i)
	}
	wg.Wait()
	for _, w := range wrong {
		t.Error(w)
	}
	if adminOK.Load() != n/2 || devForbidden.Load() != n/2 {
		t.Fatalf("admin 201: %d/%d, dev 403: %d/%d", adminOK.Load(), n/2, devForbidden.Load(), n/2)
	}
	for _, e := range s.sink.Events() {
		a, err := events.ParseAccepted(e)
		if err != nil || a.Caller.User != operator.User {
			t.Fatalf("an accepted event names %q (%v): another request's identity", a.Caller.User, err)
		}
		if num, _ := strconv.Atoi(a.Name[1:]); num%2 == 1 {
			t.Fatalf("dev's request %s was accepted", a.Name)
		}
	}
}

// Above the admission bound submit answers 429 with Retry-After and reserves nothing.
func TestAdmissionBoundRefusesBeforeReserving(t *testing.T) {
	s := newStackWith(t, func(c *Config) { c.MaxQueuedPerNamespace = 3 })
	ns := cluster.Namespace(t)
	accepted := 0
	for i := 0; i < 20; i++ {
		name := fmt.Sprintf("q%d", i)
		var e api.Error
		code, hdr := s.call(t, http.MethodPost, api.PathAsync, s.install(name, ns), &e)
		if code == http.StatusCreated {
			accepted++
			continue
		}
		if code != http.StatusTooManyRequests {
			t.Fatalf("install %s: %d %s", name, code, e.Error)
		}
		if hdr.Get("Retry-After") == "" {
			t.Error("429 without Retry-After")
		}
		if _, err := cluster.Client.CoreV1().Secrets(ns).Get(context.Background(), release.SecretName(name, 1), metav1.GetOptions{}); err == nil {
			t.Errorf("a refused install reserved %s", name)
		}
		t.Logf("after %d accepted: 429 %q", accepted, e.Error)
		// The count comes from an informer: a few in-flight requests may pass the bound.
		if accepted < 3 || accepted > 5 {
			t.Errorf("%d accepted before the first 429, want 3 (a bound of 3)", accepted)
		}
		return
	}
	t.Fatalf("%d installs against a bound of 3: no 429", accepted)
}
