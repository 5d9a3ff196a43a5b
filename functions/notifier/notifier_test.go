package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"go.uber.org/zap"
	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/async-helm/async-helm/internal/testcluster"
	"github.com/async-helm/async-helm/internal/testsink"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/kube"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/lease"
	"github.com/async-helm/async-helm/pkg/release/storage"
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
	if cfg.LeaderElectionName == "" {
		cfg.LeaderElectionName = "async-helm-notifier-" + ns // a sweeper per test
	}
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

func newHelmSide(t testing.TB, ns string) *helmSide {
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
	if err := storage.NewSecrets(cluster.Client.CoreV1().Secrets(h.ns)).Update(release.SecretName(name, rev), rel); err != nil {
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
	ns, sink, h, pendingID := pendingWeb(t)
	h.set(t, "web", 1, helmrelease.StatusDeployed, "Install complete")
	deployedID := events.StatusEventID(ns, "web", 1, "deployed", "req-web")
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
	failedID := events.StatusEventID(ns, "web", 2, "failed", "req-web")
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
	pending, deployed := events.StatusEventID(ns, "a", 1, "pending-install", "req-a"), events.StatusEventID(ns, "a", 1, "deployed", "req-a")
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
		return has(e, events.StatusEventID(ns, "r", 1, "deployed", "req-r"))
	})
	time.Sleep(500 * time.Millisecond) // let the reported status be recorded
	stop()
	before := len(sink.Events())

	// While the notifier is down: an upgrade starts and supersedes revision 1.
	h.reserve(t, "r", release.ActionUpgrade)
	h.set(t, "r", 1, helmrelease.StatusSuperseded, "")

	startNotifier(t, ns, sink, Config{Watch: true})
	want := []string{events.StatusEventID(ns, "r", 2, "pending-upgrade", "req-r"), events.StatusEventID(ns, "r", 1, "superseded", "req-r")}
	evs := sink.WaitFor(t, 10*time.Second, "the transitions made while down", func(e []cloudevents.Event) bool {
		return has(e, want[0]) && has(e, want[1])
	})
	time.Sleep(time.Second) // anything more would be a flood of old history
	evs = sink.Events()
	if got := len(evs) - before; got != 2 {
		t.Fatalf("after restart %d events, want 2: %v", got, statuses(evs[before:]))
	}
}

const testKey = "0123456789abcdef0123456789abcdef-notifier-tests"

// reserveWithEvent reserves as submit does: the signed accepted event stored in the secret.
func (h *helmSide) reserveWithEvent(t testing.TB, name string) cloudevents.Event {
	t.Helper()
	a := events.Action{Action: release.ActionInstall, Namespace: h.ns, Name: name, Revision: 1,
		SecretName: release.SecretName(name, 1), RequestID: "req-" + name, Options: events.Options{Timeout: time.Minute}}
	e, err := events.NewAccepted(a)
	if err != nil {
		t.Fatal(err)
	}
	events.Sign(&e, []byte(testKey), time.Now())
	raw, err := e.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.store.Reserve(context.Background(), release.Reservation{Namespace: h.ns, Name: name, Action: release.ActionInstall,
		Revision: 1, Chart: &chart.Metadata{Name: "tiny", Version: "0.1.0"}, RequestID: a.RequestID, Event: raw}); err != nil {
		t.Fatal(err)
	}
	return e
}

// helmCLIUpgrade writes revision 2 as the helm CLI does on a release async-helm installed:
// pending-upgrade, with the custom labels of revision 1 copied (async-helm.io/revision=1).
func (h *helmSide) helmCLIUpgrade(t *testing.T, name string) {
	t.Helper()
	h.set(t, name, 1, helmrelease.StatusDeployed, "Install complete")
	rel, err := h.store.Get(context.Background(), h.ns, name, 1)
	if err != nil {
		t.Fatal(err)
	}
	rel.Version, rel.Info.Status, rel.Info.Description = 2, helmrelease.StatusPendingUpgrade, "Preparing upgrade"
	if err := storage.NewSecrets(cluster.Client.CoreV1().Secrets(h.ns)).Create(release.SecretName(name, 2), rel); err != nil {
		t.Fatal(err)
	}
}

func (h *helmSide) status(t *testing.T, name string, rev int) *helmrelease.Release {
	t.Helper()
	rel, err := h.store.Get(context.Background(), h.ns, name, rev)
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

func TestSweeperDrivesLostWorkAgainAndFailsOnlyPastTheDeadline(t *testing.T) {
	ns := cluster.Namespace(t)
	sink, redrive := testsink.Start(t), testsink.Start(t)
	startNotifier(t, ns, sink, Config{Watch: true, SweepInterval: 300 * time.Millisecond, RedriveAfter: time.Second,
		ReaperGrace: time.Second, QueueDeadline: 8 * time.Second, RedriveSink: redrive.URL, EventSigningKey: testKey,
		EventMaxAge: time.Hour})
	h := newHelmSide(t, ns)
	queued := h.reserveWithEvent(t, "queued")
	// An executor is alive on this one: never re-sent, never failed.
	h.reserveWithEvent(t, "alive")
	hb := &lease.Heartbeat{Client: cluster.Client, Holder: "test", Duration: time.Minute}
	if held, err := hb.Hold(context.Background(), ns, release.SecretName("alive", 1)); held == nil || err != nil {
		t.Fatal(held, err)
	}
	// Its executor runs it: Helm adopted the reservation, which drops the queued label (a
	// live Lease does not hold off the queue deadline of a revision still queued).
	if _, err := cluster.Client.CoreV1().Secrets(ns).Patch(context.Background(), release.SecretName("alive", 1), types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"`+release.LabelQueued+`":null}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// Not ours: the helm CLI's revision 2, carrying our copied labels.
	h.reserveWithEvent(t, "cli")
	h.helmCLIUpgrade(t, "cli")
	// Not ours either: helm uninstall run by hand on a revision we installed (Helm's mark
	// keeps our labels; a slow uninstall stays uninstalling past every deadline here).
	h.reserveWithEvent(t, "byhand")
	h.set(t, "byhand", 1, helmrelease.StatusDeployed, "Install complete")
	h.set(t, "byhand", 1, helmrelease.StatusUninstalling, "Deletion in progress (or silently failed)")

	evs := redrive.WaitFor(t, 20*time.Second, "the stored event sent again", func(e []cloudevents.Event) bool { return len(e) > 0 })
	if evs[0].ID() != queued.ID() || string(evs[0].Data()) != string(queued.Data()) {
		t.Fatalf("re-sent %s %s, want the stored event %s", evs[0].ID(), evs[0].Data(), queued.ID())
	}
	if err := events.Verify(evs[0], []byte(testKey), time.Now(), time.Hour); err != nil {
		t.Fatalf("the re-sent event no longer verifies: %v", err)
	}
	failedID := events.StatusEventID(ns, "queued", 1, "failed", "req-queued")
	sink.WaitFor(t, 30*time.Second, "the queue deadline's failed event", func(e []cloudevents.Event) bool { return has(e, failedID) })
	rel := h.status(t, "queued", 1)
	if !strings.Contains(rel.Info.Description, "never started") || !strings.Contains(rel.Info.Description, "sent") {
		t.Errorf("reason %q does not say it never started and how often it was sent", rel.Info.Description)
	}
	for _, e := range redrive.Events() {
		if e.Subject() != events.Subject(ns, "queued") {
			t.Errorf("re-sent %s: only the queued revision had lost work", e.Subject())
		}
	}
	if st := h.status(t, "alive", 1).Info.Status; st != helmrelease.StatusPendingInstall {
		t.Errorf("a revision with a live executor became %s", st)
	}
	if st := h.status(t, "cli", 2).Info.Status; st != helmrelease.StatusPendingUpgrade {
		t.Errorf("the helm CLI's revision became %s: the sweeper touched a revision that is not ours", st)
	}
	if rel := h.status(t, "byhand", 1); rel.Info.Status != helmrelease.StatusUninstalling {
		t.Errorf("a hand-run helm uninstall became %s %q: the sweeper touched a revision that is not ours", rel.Info.Status, rel.Info.Description)
	}
}

func TestDeadLettersMustBeSignedAndAreDrivenAgain(t *testing.T) {
	ns := cluster.Namespace(t)
	sink, redrive := testsink.Start(t), testsink.Start(t)
	f, _ := startNotifier(t, ns, sink, Config{Watch: true, SweepInterval: 300 * time.Millisecond, RedriveAfter: time.Hour,
		ReaperGrace: time.Hour, QueueDeadline: time.Hour, RedriveSink: redrive.URL, EventSigningKey: testKey, EventMaxAge: time.Hour})
	srv := httptest.NewServer(f.Handler())
	t.Cleanup(srv.Close)
	h := newHelmSide(t, ns)
	e := h.reserveWithEvent(t, "web")

	post := func(ev cloudevents.Event) int {
		t.Helper()
		req, err := cehttpRequest(srv.URL+"/dead-letter", ev)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Logf("dead letter answered %d %s", resp.StatusCode, body)
		return resp.StatusCode
	}
	unsigned := e.Clone()
	unsigned.SetExtension(events.ExtSignature, nil)
	unsigned.SetExtension(events.ExtSignatureV2, nil)
	forged := e.Clone()
	events.Sign(&forged, []byte("another-key-another-key-another-key!"), time.Now())
	for what, ev := range map[string]cloudevents.Event{"unsigned": unsigned, "signed with another key": forged} {
		if code := post(ev); code != http.StatusUnauthorized {
			t.Errorf("%s dead letter: %d, want 401", what, code)
		}
	}
	m, err := cluster.Client.CoreV1().Secrets(ns).Get(context.Background(), release.SecretName("web", 1), metav1.GetOptions{})
	if err != nil || m.Annotations[release.AnnotationDeadLettered] != "" {
		t.Fatalf("a refused dead letter marked the revision: %v %v", m.Annotations, err)
	}
	if code := post(e); code != http.StatusOK {
		t.Fatalf("signed dead letter: %d", code)
	}
	evs := redrive.WaitFor(t, 10*time.Second, "the dead-lettered event sent again", func(e []cloudevents.Event) bool { return len(e) > 0 })
	if evs[0].ID() != e.ID() {
		t.Errorf("re-sent %s, want %s", evs[0].ID(), e.ID())
	}
	if st := h.status(t, "web", 1).Info.Status; st != helmrelease.StatusPendingInstall {
		t.Errorf("a dead letter changed the status to %s; it must only be driven again", st)
	}
}

func cehttpRequest(url string, e cloudevents.Event) (*http.Request, error) {
	return cehttp.NewHTTPRequestFromEvent(context.Background(), url, e)
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
		return has(e, events.StatusEventID(ns, "before", 1, "pending-install", "req-before"))
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
		return has(e, events.StatusEventID(ns, "before", 1, "deployed", "req-before"))
	})
}

// pendingWeb starts a notifier on a fresh namespace, reserves release web there and waits
// for its pending-install event.
func pendingWeb(t *testing.T) (string, *testsink.Sink, *helmSide, string) {
	t.Helper()
	ns := cluster.Namespace(t)
	sink := testsink.Start(t)
	startNotifier(t, ns, sink, Config{Watch: true})
	h := newHelmSide(t, ns)
	h.reserve(t, "web", release.ActionInstall)
	pendingID := events.StatusEventID(ns, "web", 1, "pending-install", "req-web")
	sink.WaitFor(t, 10*time.Second, "pending-install", func(e []cloudevents.Event) bool { return has(e, pendingID) })
	return ns, sink, h, pendingID
}
