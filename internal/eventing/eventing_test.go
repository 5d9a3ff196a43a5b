package eventing_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/async-helm/async-helm/internal/eventing"
	"github.com/async-helm/async-helm/internal/proc"
	"github.com/async-helm/async-helm/internal/testcharts"
	"github.com/async-helm/async-helm/internal/testcluster"
	"github.com/async-helm/async-helm/internal/testsink"
	"github.com/async-helm/async-helm/internal/teststack"
	"github.com/async-helm/async-helm/internal/testwait"
	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/submitclient"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
)

var (
	cluster *testcluster.Env
	local   *eventing.Local
	root    string
	bins    map[string]string
)

func TestMain(m *testing.M) {
	cluster = testcluster.MustStart()
	var err error
	if root, err = testcluster.RepoRoot(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if local, err = eventing.Open(eventing.Dir(root), cluster.Kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "async-helm-eventing")
	if err != nil {
		panic(err)
	}
	if bins, err = teststack.Build(dir, "submit", "notifier"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// attempts records when the executor stand-in saw each delivery of a release's event.
type attempts struct {
	mu sync.Mutex
	at map[string][]time.Time
}

func (a *attempts) add(name string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.at[name] = append(a.at[name], time.Now())
	return len(a.at[name])
}

func (a *attempts) of(name string) []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]time.Time(nil), a.at[name]...)
}

// deadLetters records what reaches the notifier's dead-letter route and its answer.
type deadLetters struct {
	mu   sync.Mutex
	seen []string // "<Ce-Knativeerrorcode> <status>"
}

// through is one namespace wired through Knative: the real submit and notifier, an executor
// stand-in, and a recorder in front of the notifier's dead-letter route.
type through struct {
	ns       string
	client   *submitclient.Client
	seen     *attempts
	dl       *deadLetters
	eventLog *testsink.Sink
	charts   *testcharts.Server
	wiring   *eventing.Wiring
}

// wireThrough wires a namespace with config/knative's Broker and Triggers (delivery: a test's
// change to a Trigger's delivery, applied with it). The executor stand-in answers each
// delivery of a release with the next status of answers[name] (then acknowledges).
func wireThrough(ctx context.Context, t *testing.T, delivery map[string]map[string]any, answers map[string][]int) *through {
	th := &through{ns: cluster.Namespace(t), seen: &attempts{at: map[string][]time.Time{}}, dl: &deadLetters{},
		eventLog: testsink.Start(t), charts: testcharts.Start(t)}
	executor := testsink.Start(t)
	executor.OnEvent = func(e cloudevents.Event) cloudevents.Result {
		a, err := events.ParseAccepted(e)
		if err != nil {
			return cloudevents.NewHTTPResult(http.StatusBadRequest, "not an accepted event: %v", err)
		}
		n := th.seen.add(a.Name)
		if n <= len(answers[a.Name]) {
			return cloudevents.NewHTTPResult(answers[a.Name][n-1], "refused by the stand-in")
		}
		return cloudevents.ResultACK
	}
	// The real notifier, behind a recorder of what Knative sends to its dead-letter route.
	notifierPort, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	notifierURL, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", notifierPort))
	rp := httputil.NewSingleHostReverseProxy(notifierURL)
	rp.ModifyResponse = func(r *http.Response) error {
		if r.Request.URL.Path == "/dead-letter" {
			th.dl.mu.Lock()
			th.dl.seen = append(th.dl.seen, fmt.Sprintf("%s %d", r.Request.Header.Get("Ce-Knativeerrorcode"), r.StatusCode))
			th.dl.mu.Unlock()
		}
		return nil
	}
	recorder := httptest.NewServer(rp)
	t.Cleanup(recorder.Close)
	submitPort, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	submitURL := fmt.Sprintf("http://127.0.0.1:%d", submitPort)
	t0 := time.Now()
	w, err := local.Wire(ctx, cluster.Admin, eventing.Options{
		Namespace: th.ns, ConfigDir: filepath.Join(root, "config", "knative"), EventLog: th.eventLog.URL, Delivery: delivery,
		Addresses: map[string]string{"submit": submitURL, "executor": executor.URL, "notifier": recorder.URL},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Broker and %d Triggers Ready in %s; K_SINK %s", len(w.Triggers), time.Since(t0).Round(time.Millisecond), w.BrokerURL)
	th.wiring = w
	key := "eventing-test-key-0123456789abcdef0123456789"
	notifier := teststack.RunPort(t, bins["notifier"], notifierPort, map[string]string{"KUBECONFIG": cluster.Kubeconfig,
		"K_SINK": w.BrokerURL, "NAMESPACES": th.ns, "EVENT_SIGNING_KEY": key, "SWEEP_INTERVAL": "500ms"})
	submit := teststack.RunPort(t, bins["submit"], submitPort, map[string]string{"KUBECONFIG": cluster.Kubeconfig,
		"K_SINK": w.BrokerURL, "ALLOW_LOOPBACK_CHARTS": "true", "EVENT_SIGNING_KEY": key})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("submit log:\n%s\nnotifier log:\n%s", submit.Output(), notifier.Output())
		}
	})
	th.client = &submitclient.Client{Server: submitURL, Token: cluster.Operator.BearerToken}
	return th
}

// install asks submit for an install; the Broker acknowledges once the channel holds the
// event, so the 201 does not wait for the executor's answers and Knative's retries.
func (th *through) install(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	start := time.Now()
	if _, err := th.client.Install(ctx, api.ReleaseRequest{Name: name, Namespace: th.ns, ChartURL: th.charts.ChartURL("tiny", "0.1.0")}); err != nil {
		t.Fatalf("install %s: %v", name, err)
	}
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Errorf("install %s answered after %s: submit waited on the delivery", name, d)
	}
}

func checkGaps(t *testing.T, at []time.Time, want ...time.Duration) {
	t.Helper()
	for i, w := range want {
		if gap := at[i+1].Sub(at[i]); gap < w-100*time.Millisecond || gap > w+1500*time.Millisecond {
			t.Errorf("retry %d came %s after the previous delivery; the Trigger says %s", i+1, gap, w)
		}
	}
}

// Submit -> broker ingress -> channel -> filter -> executor, all Knative, with
// config/knative's executor Trigger as it is (exponential backoff from PT2S): the
// executor's 429 and 503 answers are retried 2 s and then 4 s later. The notifier's status
// events reach the event log through the Broker and a Trigger.
func TestExecutorRefusalsAreRetriedAsTheTriggerSays(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	th := wireThrough(ctx, t, nil, map[string][]int{"retried": {http.StatusTooManyRequests, http.StatusServiceUnavailable}})
	th.install(ctx, t, "retried")
	if !testwait.Until(30*time.Second, func() bool { return len(th.seen.of("retried")) >= 3 }) {
		t.Fatalf("timed out waiting for three deliveries of retried; got %d", len(th.seen.of("retried")))
	}
	checkGaps(t, th.seen.of("retried"), 2*time.Second, 4*time.Second)
	if n := len(th.seen.of("retried")); n != 3 {
		t.Errorf("retried was delivered %d times; the third delivery was acknowledged", n)
	}
	pending := events.StatusEventID(th.ns, "retried", 1, "pending-install", "") + "/" // any request id
	th.eventLog.WaitFor(t, 30*time.Second, "pending-install of retried in the event log", func(e []cloudevents.Event) bool {
		return indexOf(e, pending) >= 0
	})
	if len(th.dl.seen) != 0 {
		t.Errorf("dead letters for an acknowledged event: %q", th.dl.seen)
	}
}

// Exhausted retries reach the real notifier's /dead-letter with Knative's error code; the
// notifier marks the revision and its sweeper sends the request again through the Broker.
// config/knative's 10 retries from 2 s would take 34 min: this test alone shortens them
// (retry 2, PT0.2S); the dead-letter sink stays config/knative's.
func TestExhaustedRetriesAreDeadLetteredToTheNotifier(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	unavailable := http.StatusServiceUnavailable
	th := wireThrough(ctx, t, map[string]map[string]any{"executor": {"retry": int64(2), "backoffDelay": "PT0.2S"}},
		map[string][]int{"exhausted": {unavailable, unavailable, unavailable}})
	th.install(ctx, t, "exhausted")
	if !testwait.Until(60*time.Second, func() bool { return len(th.seen.of("exhausted")) >= 4 }) {
		t.Fatalf("timed out waiting for the notifier's re-send of exhausted after its dead letter; got %d deliveries", len(th.seen.of("exhausted")))
	}
	th.dl.mu.Lock()
	got := append([]string(nil), th.dl.seen...)
	th.dl.mu.Unlock()
	// One dead letter, with the executor's last answer as Knative's error code, taken (200)
	// by the notifier: submit signed it.
	if len(got) != 1 || got[0] != "503 200" {
		t.Errorf("dead letters at the notifier (Ce-Knativeerrorcode, answer): %q, want [\"503 200\"]", got)
	}
	at := th.seen.of("exhausted")
	checkGaps(t, at, 200*time.Millisecond, 400*time.Millisecond)
	if len(at) != 4 {
		t.Errorf("exhausted was delivered %d times; want 1 + 2 retries + the notifier's re-send", len(at))
	}
}

// The bench's cpu section drops the local probe Trigger: the channel then fans out to
// config/knative's Triggers alone, and an accepted event still reaches the executor.
func TestWithoutTheProbeEventsStillReachTheExecutor(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	th := wireThrough(ctx, t, nil, nil)
	if err := th.wiring.DropProbe(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cluster.Admin)
	if err != nil {
		t.Fatal(err)
	}
	list, err := dyn.Resource(eventing.TriggerGVR).Namespace(th.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != len(th.wiring.Triggers) {
		t.Errorf("%d Triggers after DropProbe, want config/knative's and the event log's %d", len(list.Items), len(th.wiring.Triggers))
	}
	th.install(ctx, t, "after-probe")
	if !testwait.Until(30*time.Second, func() bool { return len(th.seen.of("after-probe")) >= 1 }) {
		t.Fatal("the accepted event never reached the executor once the probe Trigger was gone")
	}
	if len(th.dl.seen) != 0 {
		t.Errorf("dead letters without the probe: %q", th.dl.seen)
	}
}

func indexOf(evs []cloudevents.Event, id string) int {
	for i, e := range evs {
		if e.ID() == id || (strings.HasSuffix(id, "/") && strings.HasPrefix(e.ID(), id)) {
			return i
		}
	}
	return -1
}
