package notifier

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	helmtime "helm.sh/helm/v3/pkg/time"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

// A refused report is retried through the rate-limited queue, and nothing is lost.
func TestProcessNextRetries(t *testing.T) {
	e := newEnv(t)
	e.Reserve("web", release.ActionInstall, 1)
	key := "ns/" + release.SecretName("web", 1)
	e.sink.Refuse(true)
	e.svc.Enqueue("ns", release.SecretName("web", 1))
	if !e.svc.processNext(ctx(t)) {
		t.Fatal("queue shut down")
	}
	if n := e.svc.queue.NumRequeues(key); n != 1 {
		t.Errorf("requeues after a refusal: %d", n)
	}
	e.sink.Refuse(false)
	if !e.svc.processNext(ctx(t)) { // waits for the rate limiter's first backoff (100ms)
		t.Fatal("queue shut down")
	}
	if got := e.sink.Statuses(t); len(got) != 1 || got[0] != "pending-install" {
		t.Errorf("sent %v", got)
	}
	if n := e.svc.queue.NumRequeues(key); n != 0 {
		t.Errorf("requeues after success: %d", n)
	}
	e.svc.queue.ShutDown()
	if e.svc.processNext(ctx(t)) {
		t.Error("processNext went on after shutdown")
	}
}

// A release the helm CLI installed carries no chart label: the payload of that revision is
// read for the chart.
func TestDescribePlainHelmRelease(t *testing.T) {
	e := newEnv(t)
	now := helmtime.Time{Time: t0}
	rel := &helmrelease.Release{Name: "cli", Namespace: "ns", Version: 1,
		Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "nginx", Version: "15.0.0", AppVersion: "1.25"}},
		Info:  &helmrelease.Info{Status: helmrelease.StatusDeployed, FirstDeployed: now, LastDeployed: now}}
	if err := storage.NewSecrets(e.c.CoreV1().Secrets("ns")).Create(release.SecretName("cli", 1), rel); err != nil {
		t.Fatal(err)
	}
	key := "ns/" + release.SecretName("cli", 1)
	e.svc.observe(key, e.Meta("cli", 1))
	if err := e.svc.sync(ctx(t), key); err != nil {
		t.Fatal(err)
	}
	got, err := events.ParseStatus(e.sink.Events()[0])
	if err != nil {
		t.Fatal(err)
	}
	want := events.StatusChange{Namespace: "ns", Name: "cli", Revision: 1, Status: "deployed", Chart: "nginx", ChartVersion: "15.0.0", AppVersion: "1.25"}
	if got != want {
		t.Errorf("event %+v\nwant %+v", got, want)
	}
}

// A failed read of the payload is retried, not reported without its reason.
func TestDescribeReadErrorIsRetried(t *testing.T) {
	e := newEnv(t)
	e.Reserve("web", release.ActionInstall, 1)
	e.Set("web", 1, helmrelease.StatusFailed, "boom")
	key := "ns/" + release.SecretName("web", 1)
	e.svc.observe(key, e.Meta("web", 1))
	e.c.Fail("get", "secrets", errors.New("apiserver down"))
	if err := e.svc.sync(ctx(t), key); err == nil {
		t.Fatal("sync reported without the failure's reason")
	}
	if len(e.sink.Events()) != 0 {
		t.Error("an event went out")
	}
	e.c.Fail("get", "secrets", nil)
	if err := e.svc.sync(ctx(t), key); err != nil {
		t.Fatal(err)
	}
	if c, _ := events.ParseStatus(e.sink.Events()[0]); c.Reason != "boom" || c.Status != "failed" {
		t.Errorf("event %+v", c)
	}
}

// The source mode's catch-up fails start-up when it cannot list.
func TestCatchUpError(t *testing.T) {
	e := newEnv(t)
	e.c.Fail("list", "secrets", errors.New("forbidden"))
	if err := e.svc.Start(ctx(t), false); err == nil {
		t.Error("start without the catch-up")
	}
}

// NAMESPACES: only the named namespaces are reported.
func TestNamespacesFilter(t *testing.T) {
	e := newEnv(t)
	e.svc.Namespaces = []string{"other"}
	e.Reserve("web", release.ActionInstall, 1) // in "ns"
	if err := e.svc.Start(ctx(t), true); err != nil {
		t.Fatal(err)
	}
	if m, err := e.svc.Revisions.Get("ns/" + release.SecretName("web", 1)); err != nil || m != nil {
		t.Errorf("the index holds a secret of an unwatched namespace: %v, %v", m, err)
	}
	if len(e.sink.Events()) != 0 {
		t.Errorf("reported %d events of an unwatched namespace", len(e.sink.Events()))
	}
}

// Errors of the API server are the caller's to retry, never a silent success.
func TestAPIErrors(t *testing.T) {
	e := newEnv(t)
	e.Reserve("web", release.ActionInstall, 1)
	e.c.Fail("patch", "secrets", errors.New("down"))
	rev := e.Revision("web", 1)
	rev.Status = "deployed"
	if err := e.svc.markNotified(ctx(t), rev); err == nil {
		t.Error("markNotified with a failing patch")
	}
}

// One tenant's flood of dirty Secrets does not queue another tenant's status events or
// marks behind it: keys are handed out one namespace at a time in turn, each namespace's
// in the order added, each key once.
func TestAFloodDoesNotQueueAnotherTenant(t *testing.T) {
	const flood = 1000
	for _, q := range []struct {
		name string
		add  func(s *Service, key string)
		get  func(s *Service) (string, bool)
	}{
		{"status events", func(s *Service, key string) { s.queue.Add(key) }, func(s *Service) (string, bool) { return s.queue.Get() }},
		{"marks", func(s *Service, key string) { s.marks.Add(key) }, func(s *Service) (string, bool) { return s.marks.Get() }},
	} {
		t.Run(q.name, func(t *testing.T) {
			e := newEnv(t)
			for i := range flood {
				q.add(e.svc, fmt.Sprintf("flood/%s", release.SecretName(fmt.Sprintf("r%d", i), 1)))
			}
			q.add(e.svc, "flood/"+release.SecretName("r0", 1)) // queued already: held once
			q.add(e.svc, "ns/"+release.SecretName("web", 1))
			q.add(e.svc, tombstoneKey+"other/"+release.SecretName("db", 2))
			var order []string
			for range flood + 2 {
				key, quit := q.get(e.svc)
				if quit {
					t.Fatal("queue shut down")
				}
				order = append(order, key)
			}
			if got := slices.Index(order, "ns/"+release.SecretName("web", 1)); got > 1 {
				t.Errorf("another tenant's key came out %d-th, behind %d keys of the flooding one", got+1, got)
			}
			if got := slices.Index(order, tombstoneKey+"other/"+release.SecretName("db", 2)); got > 3 {
				t.Errorf("a third tenant's tombstone came out %d-th", got+1)
			}
			var floodOrder []string
			for _, k := range order {
				if strings.HasPrefix(k, "flood/") {
					floodOrder = append(floodOrder, k)
				}
			}
			if len(floodOrder) != flood {
				t.Fatalf("%d of the flood's %d keys came out", len(floodOrder), flood)
			}
			for i, k := range floodOrder {
				if want := "flood/" + release.SecretName(fmt.Sprintf("r%d", i), 1); k != want {
					t.Fatalf("the flood's key %d is %s, want %s (a namespace's keys in the order added)", i, k, want)
				}
			}
		})
	}
}

// A Secret whose status labels flip while the sink refuses keeps a bounded backlog, and its
// latest status is still the last one reported.
func TestABacklogIsBounded(t *testing.T) {
	e := newEnv(t)
	key := "ns/" + release.SecretName("web", 1)
	e.Reserve("web", release.ActionInstall, 1)
	e.sink.Refuse(true)
	e.svc.observe(key, e.Meta("web", 1))
	flips := []helmrelease.Status{helmrelease.StatusDeployed, helmrelease.StatusFailed}
	const n = 200
	for i := range n {
		e.Set("web", 1, flips[i%2], "flip")
		e.svc.observe(key, e.Meta("web", 1))
	}
	if got := len(e.svc.backlog[key]); got > MaxBacklog {
		t.Fatalf("a Secret flipped %d times while the sink refused holds %d statuses (bound %d)", n, got, MaxBacklog)
	}
	if err := e.svc.sync(ctx(t), key); err == nil {
		t.Fatal("sync with a refusing sink")
	}
	e.sink.Refuse(false)
	if err := e.svc.sync(ctx(t), key); err != nil {
		t.Fatal(err)
	}
	got := e.sink.Statuses(t)
	if len(got) == 0 || got[len(got)-1] != string(flips[(n-1)%2]) {
		t.Errorf("reported %v: the latest status (%s) is not the last", got, flips[(n-1)%2])
	}
}
