package notifier

import (
	"reflect"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/internal/testwait"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
)

// observe builds the backlog: first sight reports only what was never reported; later
// sights add each status change, in order; a rewrite with the same status adds nothing.
func TestObserveBacklog(t *testing.T) {
	e := newEnv(t)
	key := "ns/" + release.SecretName("web", 1)
	e.Reserve("web", release.ActionInstall, 1)
	steps := []struct {
		do      func()
		pending bool
		backlog []string
	}{
		{func() {}, true, []string{"pending-install"}},
		{func() {}, true, []string{"pending-install"}}, // same status again: nothing new
		{func() { e.Set("web", 1, helmrelease.StatusPendingInstall, "adopted") }, true, []string{"pending-install"}},
		{func() { e.Set("web", 1, helmrelease.StatusFailed, "x") }, true, []string{"pending-install", "failed"}},
		{func() { e.Set("web", 1, helmrelease.StatusDeployed, "") }, true, []string{"pending-install", "failed", "deployed"}},
	}
	for i, st := range steps {
		st.do()
		if got := e.svc.observe(key, e.Meta("web", 1)); got != st.pending {
			t.Errorf("step %d: observe = %v", i, got)
		}
		if !reflect.DeepEqual(e.svc.backlog[key], st.backlog) {
			t.Errorf("step %d: backlog %v, want %v", i, e.svc.backlog[key], st.backlog)
		}
	}
}

// A restarted notifier (nothing observed yet) reports only revisions whose status differs
// from the one recorded on the secret.
func TestFirstSightHonoursNotified(t *testing.T) {
	e := newEnv(t)
	e.Reserve("web", release.ActionInstall, 1)
	e.Set("web", 1, helmrelease.StatusDeployed, "")
	e.Patch("web", 1, `{"metadata":{"annotations":{"`+release.AnnotationNotified+`":"deployed"}}}`)
	if e.svc.observe("ns/"+release.SecretName("web", 1), e.Meta("web", 1)) {
		t.Error("a reported revision is reported again after a restart")
	}
	e.Reserve("db", release.ActionInstall, 1)
	e.Set("db", 1, helmrelease.StatusDeployed, "")
	e.Patch("db", 1, `{"metadata":{"annotations":{"`+release.AnnotationNotified+`":"pending-install"}}}`)
	if !e.svc.observe("ns/"+release.SecretName("db", 1), e.Meta("db", 1)) {
		t.Error("a change made while the notifier was down is not reported")
	}
	if got := e.svc.backlog["ns/"+release.SecretName("db", 1)]; !reflect.DeepEqual(got, []string{"deployed"}) {
		t.Errorf("backlog %v: a revision that went through several statuses while down is reported in its latest", got)
	}
}

// sync sends the backlog in order, keeps it while the sink refuses, and records the last
// reported status on the secret (a compare-and-swap on its resourceVersion).
func TestSyncReportsInOrderAndRecords(t *testing.T) {
	e := newEnv(t)
	key := "ns/" + release.SecretName("web", 1)
	e.Reserve("web", release.ActionInstall, 1)
	e.svc.observe(key, e.Meta("web", 1))
	e.Set("web", 1, helmrelease.StatusPendingInstall, "adopted")
	e.svc.observe(key, e.Meta("web", 1))
	e.Set("web", 1, helmrelease.StatusSuperseded, "")
	e.svc.observe(key, e.Meta("web", 1))
	e.Set("web", 1, helmrelease.StatusFailed, "hook failed: boom")
	e.svc.observe(key, e.Meta("web", 1))

	e.sink.Refuse(true)
	if err := e.svc.sync(ctx(t), key); err == nil {
		t.Fatal("sync with a refusing sink reported success")
	}
	if n := len(e.svc.backlog[key]); n != 3 {
		t.Fatalf("backlog after a refused send: %d, want 3", n)
	}
	e.sink.Refuse(false)
	if err := e.svc.sync(ctx(t), key); err != nil {
		t.Fatal(err)
	}
	if got := e.sink.Statuses(t); !reflect.DeepEqual(got, []string{"pending-install", "superseded", "failed"}) {
		t.Fatalf("sent %v", got)
	}
	evs := e.sink.Events()
	failed, _ := events.ParseStatus(evs[2])
	first, _ := events.ParseStatus(evs[0])
	want := events.StatusChange{Namespace: "ns", Name: "web", Revision: 1, Status: "failed", Chart: "tiny", ChartVersion: "1.0.0",
		Reason: "hook failed: boom", RequestID: "req-web"}
	if failed != want {
		t.Errorf("failed event %+v\nwant %+v", failed, want)
	}
	if first.Chart != "tiny" || first.ChartVersion != "1.0.0" || first.Reason != "" {
		t.Errorf("chart from the label: %+v", first)
	}
	if evs[2].ID() != events.StatusEventID("ns", "web", 1, "failed", "req-web") || evs[2].Type() != events.TypeStatusPrefix+"failed" {
		t.Errorf("failed event id %s type %s", evs[2].ID(), evs[2].Type())
	}
	if got := e.Revision("web", 1).Notified; got != "failed" {
		t.Errorf("notified annotation %q", got)
	}
	// Nothing left: a second sync sends nothing.
	if err := e.svc.sync(ctx(t), key); err != nil || len(e.sink.Events()) != 3 {
		t.Errorf("second sync: %v, %d events", err, len(e.sink.Events()))
	}
}

// The backlog of a deleted secret is still reported, with the release and revision its
// name stands for (an uninstall's last statuses).
func TestReportOfDeletedSecret(t *testing.T) {
	e := newEnv(t)
	key := "ns/" + release.SecretName("my.v2app", 3)
	e.svc.backlog[key] = []string{"uninstalling"}
	if err := e.svc.sync(ctx(t), key); err != nil {
		t.Fatal(err)
	}
	got, err := events.ParseStatus(e.sink.Events()[0])
	if err != nil {
		t.Fatal(err)
	}
	if got.Namespace != "ns" || got.Name != "my.v2app" || got.Revision != 3 || got.Status != "uninstalling" {
		t.Errorf("event of a deleted secret: %+v", got)
	}
}

// markNotified loses gracefully to a concurrent write: the newer version is queued by the
// watch.
func TestMarkNotifiedConflict(t *testing.T) {
	e := newEnv(t)
	e.Reserve("web", release.ActionInstall, 1)
	rev := e.Revision("web", 1)
	e.Set("web", 1, helmrelease.StatusDeployed, "")
	if err := e.svc.markNotified(ctx(t), rev); err != nil {
		t.Fatal(err)
	}
	if got := e.Revision("web", 1).Notified; got != "" {
		t.Errorf("a stale status was recorded over a newer write: %q", got)
	}
}

// Watch mode: the shared index feeds the queue; a reservation and its outcome are
// reported in order.
func TestStartWatchReports(t *testing.T) {
	e := newEnv(t)
	e.svc.Workers = 2
	e.Reserve("web", release.ActionInstall, 1)
	if err := e.svc.Start(ctx(t), true); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, func() bool { return len(e.sink.Events()) == 1 })
	e.Set("web", 1, helmrelease.StatusDeployed, "")
	testwait.For(t, func() bool { return len(e.sink.Events()) == 2 })
	if got := e.sink.Statuses(t); !reflect.DeepEqual(got, []string{"pending-install", "deployed"}) {
		t.Errorf("sent %v", got)
	}
	testwait.For(t, func() bool { return e.Revision("web", 1).Notified == "deployed" })
}

// Source mode: catch up once with every release secret, then work on what Enqueue gives.
func TestStartSourceModeCatchesUp(t *testing.T) {
	e := newEnv(t)
	e.Reserve("web", release.ActionInstall, 1)
	if err := e.svc.Start(ctx(t), false); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, func() bool { return len(e.sink.Events()) == 1 })
	e.Set("web", 1, helmrelease.StatusDeployed, "")
	e.svc.Enqueue("ns", release.SecretName("web", 1))
	testwait.For(t, func() bool { return len(e.sink.Events()) == 2 })
}

// A failed record that does not decode (any tenant's, ours or not) is reported from its
// labels: before, describe's decode error retried it for ever and nothing was reported.
func TestFailedUndecodableRecordIsReportedFromItsLabels(t *testing.T) {
	e := newEnv(t)
	e.HostileRecord("evil", nil)
	e.Patch("evil", 1, `{"metadata":{"labels":{"status":"failed","async-helm.io/revision":null,"async-helm.io/chart":null}}}`)
	key := "ns/" + release.SecretName("evil", 1)
	if err := e.svc.sync(ctx(t), key); err != nil {
		t.Fatalf("sync: %v", err)
	}
	if got := e.sink.Statuses(t); len(got) != 1 || got[0] != "failed" {
		t.Fatalf("reported %v", got)
	}
}

// A record that does not decode is logged once with its name, not on every retry or sweep.
func TestUndecodableRecordIsLoggedOnce(t *testing.T) {
	e := newEnv(t)
	core, logs := observer.New(zap.WarnLevel)
	e.svc.Log = zap.New(core).Sugar()
	e.HostileRecord("evil", nil)
	e.Patch("evil", 1, `{"metadata":{"labels":{"status":"failed","async-helm.io/revision":null,"async-helm.io/chart":null}}}`)
	key := "ns/" + release.SecretName("evil", 1)
	for i := 0; i < 3; i++ {
		e.svc.observe(key, e.Meta("evil", 1))
		e.svc.mu.Lock()
		e.svc.backlog[key] = []string{"failed"} // reported again, as after a restart
		e.svc.mu.Unlock()
		if err := e.svc.sync(ctx(t), key); err != nil {
			t.Fatal(err)
		}
	}
	got := logs.FilterMessageSnippet("does not decode").All()
	if len(got) != 1 || got[0].ContextMap()["secret"] != release.SecretName("evil", 1) {
		t.Fatalf("logged %d times: %v", len(got), got)
	}
}
