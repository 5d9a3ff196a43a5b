package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"go.uber.org/zap"
	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"

	"github.com/async-helm/async-helm/internal/testcluster"
	"github.com/async-helm/async-helm/internal/testsink"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/kube"
	"github.com/async-helm/async-helm/pkg/release"
)

var cluster *testcluster.Env

func TestMain(m *testing.M) {
	cluster = testcluster.MustStart()
	os.Exit(m.Run())
}

func startNotifier(t *testing.T, ns string, sink *testsink.Sink, cfg Config) (*Function, context.CancelFunc) {
	t.Helper()
	cfg.Sink = sink.URL
	cfg.Kubeconfig = cluster.Kubeconfig
	cfg.Namespaces = []string{ns}
	if cfg.Workers == 0 {
		cfg.Workers = 2
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := New(cfg, zap.NewNop().Sugar(), nil)
	if err := f.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return f, cancel
}

type helmSide struct {
	store *release.Store
	ns    string
}

func newHelmSide(t *testing.T, ns string) *helmSide {
	cl, err := kube.Open(cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return &helmSide{store: &release.Store{Client: cl.Typed, Metadata: cl.Metadata}, ns: ns}
}

func (h *helmSide) reserve(t *testing.T, name string, action release.Action) int {
	t.Helper()
	rev, err := h.store.NextRevision(context.Background(), h.ns, name, action)
	if err == nil {
		_, err = h.store.Reserve(context.Background(), release.Reservation{Namespace: h.ns, Name: name, Action: action, Revision: rev,
			Chart: &chart.Metadata{Name: "tiny", Version: "0.1.0"}, RequestID: "req-" + name})
	}
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// set writes a status the way Helm's driver does (the whole secret rewritten).
func (h *helmSide) set(t *testing.T, name string, rev int, st helmrelease.Status, desc string) {
	t.Helper()
	rel, err := h.store.Get(context.Background(), h.ns, name, rev)
	if err != nil {
		t.Fatal(err)
	}
	rel.Info.Status, rel.Info.Description = st, desc
	if err := driver.NewSecrets(cluster.Client.CoreV1().Secrets(h.ns)).Update(release.SecretName(name, rev), rel); err != nil {
		t.Fatal(err)
	}
}

func statuses(evs []cloudevents.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, strings.TrimPrefix(e.Type(), events.TypeStatusPrefix)+"@"+e.ID())
	}
	return out
}

func has(evs []cloudevents.Event, id string) bool {
	for _, e := range evs {
		if e.ID() == id {
			return true
		}
	}
	return false
}

func TestTransitionsAreReportedInOrderWithTheContract(t *testing.T) {
	ns := cluster.Namespace(t)
	sink := testsink.Start(t)
	startNotifier(t, ns, sink, Config{Watch: true})
	h := newHelmSide(t, ns)
	h.reserve(t, "web", release.ActionInstall)
	pendingID := events.StatusEventID(ns, "web", 1, "pending-install")
	sink.WaitFor(t, 10*time.Second, "pending-install", func(e []cloudevents.Event) bool { return has(e, pendingID) })
	h.set(t, "web", 1, helmrelease.StatusDeployed, "Install complete")
	deployedID := events.StatusEventID(ns, "web", 1, "deployed")
	evs := sink.WaitFor(t, 10*time.Second, "deployed", func(e []cloudevents.Event) bool { return has(e, deployedID) })
	if len(evs) != 2 || evs[0].ID() != pendingID || evs[1].ID() != deployedID {
		t.Fatalf("events %v", statuses(evs))
	}
	e := evs[1]
	sc, err := events.ParseStatus(e)
	if err != nil {
		t.Fatal(err)
	}
	if e.Type() != events.TypeStatusPrefix+"deployed" || e.Subject() != ns+"/web" || e.Source() != events.SourceNotifier {
		t.Errorf("event %s %s %s", e.Type(), e.Subject(), e.Source())
	}
	if sc.Chart != "tiny" || sc.ChartVersion != "0.1.0" || sc.Revision != 1 || sc.RequestID != "req-web" || e.Extensions()[events.ExtRequestID] != "req-web" {
		t.Errorf("payload %+v extensions %v", sc, e.Extensions())
	}

	// A failure carries Helm's description as the reason.
	h.reserve(t, "web", release.ActionUpgrade)
	h.set(t, "web", 2, helmrelease.StatusFailed, `Release "web" failed: boom`)
	failedID := events.StatusEventID(ns, "web", 2, "failed")
	evs = sink.WaitFor(t, 10*time.Second, "failed", func(e []cloudevents.Event) bool { return has(e, failedID) })
	for _, e := range evs {
		if e.ID() == failedID {
			sc, _ := events.ParseStatus(e)
			if sc.Reason != `Release "web" failed: boom` {
				t.Errorf("reason %q", sc.Reason)
			}
		}
	}
}

func TestSinkDownThenUpLosesNothing(t *testing.T) {
	ns := cluster.Namespace(t)
	sink := testsink.Start(t)
	sink.Refuse(http.StatusServiceUnavailable)
	startNotifier(t, ns, sink, Config{Watch: true})
	h := newHelmSide(t, ns)
	h.reserve(t, "a", release.ActionInstall)
	h.set(t, "a", 1, helmrelease.StatusDeployed, "")
	time.Sleep(2 * time.Second) // transitions happen while the sink is down
	if n := len(sink.Events()); n != 0 {
		t.Fatalf("%d events accepted by a refusing sink", n)
	}
	sink.Refuse(0)
	// Both transitions arrive, in order, though the first was over before the sink came back.
	pending, deployed := events.StatusEventID(ns, "a", 1, "pending-install"), events.StatusEventID(ns, "a", 1, "deployed")
	evs := sink.WaitFor(t, 45*time.Second, "both transitions after the sink came back", func(e []cloudevents.Event) bool {
		return has(e, pending) && has(e, deployed)
	})
	if evs[0].ID() != pending || evs[1].ID() != deployed {
		t.Errorf("order after the outage: %v", statuses(evs))
	}
}

func TestRestartReportsWhatHappenedWhileDownAndNothingTwice(t *testing.T) {
	ns := cluster.Namespace(t)
	sink := testsink.Start(t)
	_, stop := startNotifier(t, ns, sink, Config{Watch: true})
	h := newHelmSide(t, ns)
	h.reserve(t, "r", release.ActionInstall)
	h.set(t, "r", 1, helmrelease.StatusDeployed, "")
	sink.WaitFor(t, 10*time.Second, "deployed", func(e []cloudevents.Event) bool {
		return has(e, events.StatusEventID(ns, "r", 1, "deployed"))
	})
	time.Sleep(500 * time.Millisecond) // let the reported status be recorded
	stop()
	before := len(sink.Events())

	// While the notifier is down: an upgrade starts and supersedes revision 1.
	h.reserve(t, "r", release.ActionUpgrade)
	h.set(t, "r", 1, helmrelease.StatusSuperseded, "")

	startNotifier(t, ns, sink, Config{Watch: true})
	want := []string{events.StatusEventID(ns, "r", 2, "pending-upgrade"), events.StatusEventID(ns, "r", 1, "superseded")}
	evs := sink.WaitFor(t, 10*time.Second, "the transitions made while down", func(e []cloudevents.Event) bool {
		return has(e, want[0]) && has(e, want[1])
	})
	time.Sleep(time.Second) // anything more would be a flood of old history
	evs = sink.Events()
	if got := len(evs) - before; got != 2 {
		t.Fatalf("after restart %d events, want 2: %v", got, statuses(evs[before:]))
	}
}

func TestReaperFailsRevisionsWithNoLiveExecutor(t *testing.T) {
	ns := cluster.Namespace(t)
	sink := testsink.Start(t)
	startNotifier(t, ns, sink, Config{Watch: true, ReaperGrace: 2 * time.Second, ReaperInterval: 500 * time.Millisecond})
	h := newHelmSide(t, ns)
	h.reserve(t, "lost", release.ActionInstall)
	// A second revision-holder whose executor is alive must be left alone.
	h.reserve(t, "alive", release.ActionInstall)
	hb := &release.Heartbeat{Client: cluster.Client, Holder: "test", Duration: time.Minute}
	if ok, err := hb.Acquire(context.Background(), ns, release.SecretName("alive", 1)); !ok || err != nil {
		t.Fatal(ok, err)
	}
	failedID := events.StatusEventID(ns, "lost", 1, "failed")
	evs := sink.WaitFor(t, 30*time.Second, "the reaper's failed event", func(e []cloudevents.Event) bool { return has(e, failedID) })
	for _, e := range evs {
		if e.ID() == failedID {
			sc, _ := events.ParseStatus(e)
			if !strings.Contains(sc.Reason, "reaper") {
				t.Errorf("reason %q", sc.Reason)
			}
		}
	}
	rel, err := h.store.Get(context.Background(), ns, "alive", 1)
	if err != nil || rel.Info.Status != helmrelease.StatusPendingInstall {
		t.Errorf("a revision with a live executor was reaped: %v %v", rel.Info.Status, err)
	}
}

func TestApiServerSourceModeGivesTheSameEvents(t *testing.T) {
	ns := cluster.Namespace(t)
	sink := testsink.Start(t)
	h := newHelmSide(t, ns)
	h.reserve(t, "before", release.ActionInstall) // made before start: caught up at start
	f, _ := startNotifier(t, ns, sink, Config{Watch: false})
	srv := httptest.NewServer(f.Handler())
	defer srv.Close()
	sink.WaitFor(t, 10*time.Second, "catch-up", func(e []cloudevents.Event) bool {
		return has(e, events.StatusEventID(ns, "before", 1, "pending-install"))
	})
	h.set(t, "before", 1, helmrelease.StatusDeployed, "")
	c, err := cloudevents.NewClientHTTP()
	if err != nil {
		t.Fatal(err)
	}
	e := cloudevents.NewEvent()
	e.SetID("apiserver-1")
	e.SetSource("https://kubernetes.default.svc")
	e.SetType("dev.knative.apiserver.ref.update")
	_ = e.SetData(cloudevents.ApplicationJSON, map[string]string{"kind": "Secret", "apiVersion": "v1", "namespace": ns, "name": release.SecretName("before", 1)})
	if res := c.Send(cloudevents.ContextWithTarget(context.Background(), srv.URL), e); !cloudevents.IsACK(res) {
		t.Fatalf("source event: %v", res)
	}
	sink.WaitFor(t, 10*time.Second, "deployed via the source", func(e []cloudevents.Event) bool {
		return has(e, events.StatusEventID(ns, "before", 1, "deployed"))
	})
}

func TestDeadLetteredRequestsFailTheirRevision(t *testing.T) {
	ns := cluster.Namespace(t)
	sink := testsink.Start(t)
	f, _ := startNotifier(t, ns, sink, Config{Watch: true})
	srv := httptest.NewServer(f.Handler())
	defer srv.Close()
	h := newHelmSide(t, ns)
	rev := h.reserve(t, "lost", release.ActionInstall)
	e, err := events.NewAccepted(events.Action{Action: release.ActionInstall, Namespace: ns, Name: "lost", Revision: rev,
		SecretName: release.SecretName("lost", rev), RequestID: "req-lost"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cloudevents.NewClientHTTP()
	if err != nil {
		t.Fatal(err)
	}
	if res := c.Send(cloudevents.ContextWithTarget(context.Background(), srv.URL+"/dead-letter"), e); !cloudevents.IsACK(res) {
		t.Fatalf("dead letter: %v", res)
	}
	rel, err := h.store.Get(context.Background(), ns, "lost", rev)
	if err != nil || rel.Info.Status != helmrelease.StatusFailed || !strings.Contains(rel.Info.Description, "dead-lettered") {
		t.Fatalf("after the dead letter: %v %q %v", rel.Info.Status, rel.Info.Description, err)
	}
	sink.WaitFor(t, 10*time.Second, "failed event", func(e []cloudevents.Event) bool {
		return has(e, events.StatusEventID(ns, "lost", rev, "failed"))
	})
}
