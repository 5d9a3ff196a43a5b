package main

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/release"
)

// Issue 43 on the local cluster, its bounds scaled down (MAX_QUEUED 4,
// MAX_QUEUED_PER_NAMESPACE 2, nothing consumes): the operator fills its two namespaces'
// bound, which filled the service's and refused every other namespace before. dev, in a
// namespace of its own, is still admitted; the operator, over its share as a caller, gets
// 429 with Retry-After in a third namespace too. The ledger is a namespace of this test's
// own (async-helm's namespace in a deployment), so other tests' requests do not count.
func TestAUserWithTwoNamespacesDoesNotFillTheBoundOnTheCluster(t *testing.T) {
	if cluster.Dev.BearerToken == "" {
		t.Skip("the kubeconfig has no dev token (not the local cluster)")
	}
	ledgerNS := cluster.Namespace(t)
	s := newStackWith(t, func(c *Config) {
		c.MaxQueued, c.MaxQueuedPerNamespace, c.Namespace = 4, 2, ledgerNS
	})
	a1, a2, a3, b1 := cluster.Namespace(t), cluster.Namespace(t), cluster.Namespace(t), cluster.Namespace(t)
	for i, ns := range []string{a1, a1, a2, a2} {
		if code, _ := s.postAs(t, s.token, "a"+strconv.Itoa(i), ns); code != http.StatusCreated {
			t.Fatalf("operator's install %d in %s, below the bound: %d", i, ns, code)
		}
	}
	grant(t, b1, "edit")
	waitAllowed(t, b1)
	if code, _ := s.postAs(t, cluster.Dev.BearerToken, "b0", b1); code != http.StatusCreated {
		t.Fatalf("dev's install after the operator filled two namespaces' bound: %d, want 201", code)
	}
	for _, ns := range []string{a3, a1} {
		code, h := s.postAs(t, s.token, "a9", ns)
		if retry, _ := strconv.Atoi(h.Get("Retry-After")); code != http.StatusTooManyRequests || retry < 1 {
			t.Errorf("operator's install in %s, over its share: %d Retry-After %q, want 429 with Retry-After", ns, code, h.Get("Retry-After"))
		}
	}
	if q := s.queue(t, b1, "b0"); q == nil || q.Position != 1 || q.Total != 1 {
		t.Errorf("dev's install: queue %+v, want position 1 of 1 in its own namespace's queue", q)
	}
}

// A namespace editor at MAX_QUEUED_PER_NAMESPACE relabels its own reservations out of
// pending (status deployed, no queued label, no seal; their payloads stay pending, so an
// executor would still run them): the ledger is not in its namespace, so they still count.
func TestRelabelledReservationsStillCountOnTheCluster(t *testing.T) {
	s := newStackWith(t, func(c *Config) {
		c.MaxQueuedPerNamespace, c.Namespace = 2, cluster.Namespace(t)
		c.EventSigningKey = "admission-relabel-test-key-0123456789"
	})
	ns := cluster.Namespace(t)
	for _, n := range []string{"a", "b"} {
		if code, _ := s.postAs(t, s.token, n, ns); code != http.StatusCreated {
			t.Fatalf("install %s/%s: %d", ns, n, code)
		}
		relabel(t, ns, n, `{"`+release.LabelStatus+`":"deployed","`+release.LabelQueued+`":null,"`+release.LabelSeal+`":null}`)
	}
	for _, n := range []string{"a", "b"} {
		if s.queue(t, ns, n) == nil {
			t.Errorf("%s relabelled deployed, payload pending: no longer queued", n)
		}
	}
	if code, _ := s.postAs(t, s.token, "c", ns); code != http.StatusTooManyRequests {
		t.Fatalf("a and b relabelled out of pending at a bound of 2: install c answered %d, want 429", code)
	}
}

// postAs asks, with token, for the install of name in ns and answers the status code.
func (s *stack) postAs(t *testing.T, token, name, ns string) (int, http.Header) {
	t.Helper()
	own := s.token
	s.token = token
	defer func() { s.token = own }()
	var e api.Error
	return s.call(t, http.MethodPost, api.PathAsync, s.install(name, ns), &e)
}

// queue is the queue get answers for release name in ns.
func (s *stack) queue(t *testing.T, ns, name string) *api.Queue {
	t.Helper()
	var rel api.Release
	if code, _ := s.call(t, http.MethodGet, api.PathRelease+"?"+url.Values{"ns": {ns}, "name": {name}}.Encode(), nil, &rel); code != http.StatusOK {
		t.Fatalf("get %s/%s: %d", ns, name, code)
	}
	return rel.Queue
}

// relabel merges labels into revision 1 of name, as an editor of namespace ns can.
func relabel(t *testing.T, ns, name, labels string) {
	t.Helper()
	if _, err := cluster.Client.CoreV1().Secrets(ns).Patch(context.Background(), release.SecretName(name, 1),
		types.MergePatchType, []byte(`{"metadata":{"labels":`+labels+`}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}
