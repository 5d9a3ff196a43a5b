package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/internal/testwait"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/lease"
)

// watchCounter counts the API watches the executor's Helm factory opens (every action's
// and client's requests go through it), those still open, those opened after the cancel
// (cancelled) and the requests sent after the action ended (ended).
type watchCounter struct {
	mu                     sync.Mutex
	open, started, late    int
	requests, lateRequests int
	cancelled, ended       bool
}

func (w *watchCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		watch := req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1"
		w.mu.Lock()
		w.requests++
		if w.ended {
			w.lateRequests++
		}
		if watch {
			w.started++
			if w.cancelled {
				w.late++
			}
		}
		w.mu.Unlock()
		resp, err := rt.RoundTrip(req)
		if err != nil || !watch {
			return resp, err
		}
		w.mu.Lock()
		w.open++
		w.mu.Unlock()
		resp.Body = &closeOnce{ReadCloser: resp.Body, done: func() { w.mu.Lock(); w.open--; w.mu.Unlock() }}
		return resp, nil
	})
}

// cancel marks the cancel: a watch opened from then on is late.
func (w *watchCounter) cancel() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cancelled = true
}

// end marks the end of the action: any request from then on is late.
func (w *watchCounter) end() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ended = true
}

// sent is the number of requests sent so far.
func (w *watchCounter) sent() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.requests
}

func (w *watchCounter) counts() (open, started, late, lateRequests int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.open, w.started, w.late, w.lateRequests
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type closeOnce struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (c *closeOnce) Close() error {
	c.once.Do(c.done)
	return c.ReadCloser.Close()
}

// An install with wait in a slow namespace, cancelled after 10 s, ends failed on both
// engines. Under v4 the cancel ends the wait (it polls each waited object) and Helm's
// goroutine returns, so no API watch or request of that action follows; under v3 the wait goes on
// behind the fence (an orphan) until Helm's own timeout.
func TestCancelledWaitEndsFailedAndV4StopsWatching(t *testing.T) {
	engines(t, func(t *testing.T, engine helmexec.Engine) {
		w := &watchCounter{}
		x := newInterop(t, Config{HelmEngine: string(engine)}, helmexec.WithTransport(w.wrap))
		x.submit.Heartbeat = &lease.Heartbeat{Client: cluster.Client, Holder: "submit", Duration: time.Hour,
			CancelKey: []byte(x.fn.cfg.EventSigningKey)} // signs the cancel as the executor checks it
		ns := cluster.SlowNamespace(t)
		ev := x.accept(t, release.ActionInstall, ns, "web", request{chart: "tiny", wait: true})
		start := time.Now()
		done := make(chan int, 1)
		go func() { done <- x.send(t, ev) }()
		waitLease(t, ns, release.SecretName("web", 1))
		<-time.After(7*time.Second - time.Since(start)) // the pods of a slow namespace take 60 s
		before := w.sent()
		<-time.After(10*time.Second - time.Since(start))
		if polls := w.sent() - before; engine == helmexec.EngineV4 && polls == 0 {
			t.Fatalf("the v4 engine's wait is not polling at the cancel: no request in the last 3 s")
		}
		w.cancel()
		if _, err := x.submit.Cancel(context.Background(), ns, "web", nil); err != nil {
			t.Fatalf("cancel: %v", err)
		}
		if code := <-done; code != http.StatusOK {
			t.Fatalf("executor answered %d", code)
		}
		rel, err := x.store.Get(context.Background(), ns, "web", 1)
		if err != nil {
			t.Fatal(err)
		}
		if rel.Info.Status != helmrelease.StatusFailed || !strings.Contains(rel.Info.Description, "cancelled by") {
			t.Fatalf("after the cancel: %s %q, want failed, cancelled by", rel.Info.Status, rel.Info.Description)
		}
		orphans := x.fn.svc.Orphans
		if engine == helmexec.EngineV3 {
			if a := orphans.Count(); a != 1 {
				t.Errorf("v3: %d orphans after the cancel; its wait goes on behind the fence until Helm's timeout", a)
			}
			return
		}
		// Helm's goroutine returns once its wait ended: from then on nothing of the action runs.
		testwait.Within(t, 30*time.Second, "the v4 action's goroutine to return and its watches to close", func() bool {
			a := orphans.Count()
			open, _, _, _ := w.counts()
			return a == 0 && open == 0
		})
		w.end()
		// A reflector of its wait left running would list and watch again within its backoff
		// (about a second).
		<-time.After(5 * time.Second)
		_, started, late, lateRequests := w.counts()
		t.Logf("v4: %d watches opened before the cancel, all closed; %d watches after the cancel, %d requests after the action ended", started, late, lateRequests)
		if late != 0 || lateRequests != 0 {
			t.Errorf("%d watches opened after the cancel, %d requests after the action ended (of %d watches in all)", late, lateRequests, started)
		}
	})
}
