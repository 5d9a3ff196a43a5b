package main

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/release"
)

// The hostile review's open row (docs/security.md), on the local cluster: a namespace
// editor at MAX_QUEUED_PER_NAMESPACE flips the status label of its own sealed
// reservations (their payloads stay pending, so an executor would still run them). Before,
// each flip took its revision out of the count and the next install was admitted past the
// bound. A reservation in another namespace that loses its queued label is the marker that
// submit's informer saw the flips (one watch: events arrive in order).
func TestRelabelledReservationsStillCountOnTheCluster(t *testing.T) {
	s := newStackWith(t, func(c *Config) {
		c.MaxQueuedPerNamespace = 2
		c.EventSigningKey = "admission-relabel-test-key-0123456789"
	})
	ns, other := cluster.Namespace(t), cluster.Namespace(t)
	for _, r := range [][2]string{{ns, "a"}, {ns, "b"}, {other, "marker"}} {
		if code := s.post(t, r[1], r[0]); code != http.StatusCreated {
			t.Fatalf("install %s/%s: %d", r[0], r[1], code)
		}
		s.awaitQueued(t, r[0], r[1], true)
	}
	for _, n := range []string{"a", "b"} {
		relabel(t, ns, n, `{"`+release.LabelStatus+`":"deployed"}`)
	}
	relabel(t, other, "marker", `{"`+release.LabelQueued+`":null}`)
	s.awaitQueued(t, other, "marker", false)
	for _, n := range []string{"a", "b"} {
		if s.queue(t, ns, n) == nil {
			t.Errorf("%s relabelled deployed, payload pending: no longer queued in submit's index", n)
		}
	}
	if code := s.post(t, "c", ns); code != http.StatusTooManyRequests {
		t.Fatalf("a and b relabelled deployed at a bound of 2: install c answered %d, want 429", code)
	}
}

// post asks for the install of name in ns and answers the status code.
func (s *stack) post(t *testing.T, name, ns string) int {
	t.Helper()
	var e api.Error
	code, _ := s.call(t, http.MethodPost, api.PathAsync, s.install(name, ns), &e)
	return code
}

// queue is the queue get answers for release name in ns: where submit's index has it.
func (s *stack) queue(t *testing.T, ns, name string) *api.Queue {
	t.Helper()
	var rel api.Release
	if code, _ := s.call(t, http.MethodGet, api.PathRelease+"?"+url.Values{"ns": {ns}, "name": {name}}.Encode(), nil, &rel); code != http.StatusOK {
		t.Fatalf("get %s/%s: %d", ns, name, code)
	}
	return rel.Queue
}

// awaitQueued waits until submit's index says release name of ns is queued, or is not
// (the informer is a few milliseconds behind the API server).
func (s *stack) awaitQueued(t *testing.T, ns, name string, queued bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for (s.queue(t, ns, name) != nil) != queued {
		if time.Now().After(deadline) {
			t.Fatalf("%s/%s: queued is not %v after 20s", ns, name, queued)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// relabel merges labels into revision 1 of name, as an editor of namespace ns can.
func relabel(t *testing.T, ns, name, labels string) {
	t.Helper()
	if _, err := cluster.Client.CoreV1().Secrets(ns).Patch(context.Background(), release.SecretName(name, 1),
		types.MergePatchType, []byte(`{"metadata":{"labels":`+labels+`}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}
