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
	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/submitclient"
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

// Submit -> broker ingress -> channel -> filter -> executor, all Knative: the executor's 429
// and 503 answers are retried with the backoff config/knative's Trigger gives, and once the
// retries are exhausted the event reaches the real notifier's /dead-letter with Knative's
// error code; the notifier marks the revision and its sweeper sends the request again
// through the Broker. Its status events reach the event log through a Trigger.
func TestExecutorRefusalsAreRetriedThenDeadLetteredToTheNotifier(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := cluster.Namespace(t)
	charts := testcharts.Start(t)
	eventLog := testsink.Start(t)

	// The executor stand-in: "retried" gets 429, then 503, then an acknowledgement;
	// "exhausted" gets 503 three times (every delivery the shortened Trigger makes), then an
	// acknowledgement (the notifier's re-send).
	seen := &attempts{at: map[string][]time.Time{}}
	executor := testsink.Start(t)
	executor.OnEvent = func(e cloudevents.Event) cloudevents.Result {
		a, err := events.ParseAccepted(e)
		if err != nil {
			return cloudevents.NewHTTPResult(http.StatusBadRequest, "not an accepted event: %v", err)
		}
		n := seen.add(a.Name)
		switch {
		case a.Name == "retried" && n == 1:
			return cloudevents.NewHTTPResult(http.StatusTooManyRequests, "busy")
		case a.Name == "retried" && n == 2, a.Name == "exhausted" && n <= 3:
			return cloudevents.NewHTTPResult(http.StatusServiceUnavailable, "unavailable")
		}
		return cloudevents.ResultACK
	}

	// The real notifier, behind a recorder of what Knative sends to its dead-letter route.
	notifierPort, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	notifierURL, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", notifierPort))
	dl := &deadLetters{}
	rp := httputil.NewSingleHostReverseProxy(notifierURL)
	rp.ModifyResponse = func(r *http.Response) error {
		if r.Request.URL.Path == "/dead-letter" {
			dl.mu.Lock()
			dl.seen = append(dl.seen, fmt.Sprintf("%s %d", r.Request.Header.Get("Ce-Knativeerrorcode"), r.StatusCode))
			dl.mu.Unlock()
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
		Namespace: ns, ConfigDir: filepath.Join(root, "config", "knative"), EventLog: eventLog.URL,
		Addresses: map[string]string{"submit": submitURL, "executor": executor.URL, "notifier": recorder.URL},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Broker and %d Triggers Ready in %s; K_SINK %s", len(w.Triggers), time.Since(t0).Round(time.Millisecond), w.BrokerURL)

	env := map[string]string{"KUBECONFIG": cluster.Kubeconfig, "K_SINK": w.BrokerURL, "ALLOW_LOOPBACK_CHARTS": "true",
		"EVENT_SIGNING_KEY": "eventing-test-key"}
	notifier := teststack.RunPort(t, bins["notifier"], notifierPort, map[string]string{"KUBECONFIG": cluster.Kubeconfig,
		"K_SINK": w.BrokerURL, "NAMESPACES": ns, "EVENT_SIGNING_KEY": "eventing-test-key", "SWEEP_INTERVAL": "500ms"})
	submit := teststack.RunPort(t, bins["submit"], submitPort, env)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("submit log:\n%s\nnotifier log:\n%s", submit.Output(), notifier.Output())
		}
	})
	client := &submitclient.Client{Server: submitURL, Token: cluster.Admin.BearerToken}
	install := func(name string) {
		t.Helper()
		start := time.Now()
		if _, err := client.Install(ctx, api.ReleaseRequest{Name: name, Namespace: ns, ChartURL: charts.ChartURL("tiny", "0.1.0")}); err != nil {
			t.Fatalf("install %s: %v", name, err)
		}
		// The Broker acknowledges once the channel holds the event: the 201 does not wait
		// for the executor's answers and Knative's retries.
		if d := time.Since(start); d > 1500*time.Millisecond {
			t.Errorf("install %s answered after %s: submit waited on the delivery", name, d)
		}
	}

	// 1. config/knative's executor-install Trigger: exponential backoff from PT2S.
	install("retried")
	waitFor(t, 30*time.Second, "three deliveries of retried", func() bool { return len(seen.of("retried")) >= 3 }, func() string { return fmt.Sprint(len(seen.of("retried")), " deliveries") })
	at := seen.of("retried")
	for i, want := range []time.Duration{2 * time.Second, 4 * time.Second} {
		if gap := at[i+1].Sub(at[i]); gap < want-100*time.Millisecond || gap > want+1500*time.Millisecond {
			t.Errorf("retry %d came %s after the previous delivery; the Trigger says %s", i+1, gap, want)
		}
	}
	if n := len(seen.of("retried")); n != 3 {
		t.Errorf("retried was delivered %d times; the third delivery was acknowledged", n)
	}

	// 2. Exhausted retries. The Trigger's own 10 retries from 2 s would take 34 min: this
	// test alone shortens them (retry 2, PT0.2S); the dead-letter sink stays config/knative's.
	if err := w.PatchTrigger(ctx, "executor-install", map[string]interface{}{"spec": map[string]interface{}{
		"delivery": map[string]interface{}{"retry": 2, "backoffDelay": "PT0.2S"}}}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	install("exhausted")
	waitFor(t, 60*time.Second, "the notifier's re-send of exhausted after its dead letter", func() bool { return len(seen.of("exhausted")) >= 4 },
		func() string { return fmt.Sprint(len(seen.of("exhausted")), " deliveries") })
	dl.mu.Lock()
	got := append([]string(nil), dl.seen...)
	dl.mu.Unlock()
	// One dead letter, with the executor's last answer as Knative's error code, taken (200)
	// by the notifier: submit signed it.
	if len(got) != 1 || got[0] != "503 200" {
		t.Errorf("dead letters at the notifier (Ce-Knativeerrorcode, answer): %q, want [\"503 200\"]", got)
	}
	at = seen.of("exhausted")
	for i, want := range []time.Duration{200 * time.Millisecond, 400 * time.Millisecond} {
		if gap := at[i+1].Sub(at[i]); gap < want-50*time.Millisecond || gap > want+time.Second {
			t.Errorf("retry %d of exhausted came %s after the previous delivery; the patched Trigger says %s", i+1, gap, want)
		}
	}
	if len(at) != 4 {
		t.Errorf("exhausted was delivered %d times; want 1 + 2 retries + the notifier's re-send", len(at))
	}
	// The status events of both releases went notifier -> Broker -> event-log Trigger.
	pending := events.StatusEventID(ns, "retried", 1, "pending-install")
	eventLog.WaitFor(t, 30*time.Second, "pending-install of retried in the event log", func(e []cloudevents.Event) bool {
		return indexOf(e, pending) >= 0
	})
}

func indexOf(evs []cloudevents.Event, id string) int {
	for i, e := range evs {
		if e.ID() == id {
			return i
		}
	}
	return -1
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool, got func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; got %s", timeout, what, got())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
