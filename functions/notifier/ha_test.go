package main

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/internal/proc"
	"github.com/async-helm/async-helm/internal/testsink"
	"github.com/async-helm/async-helm/internal/teststack"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
)

// metric reads one unlabelled value from a process's /metrics (-1 when absent).
func metric(t testing.TB, p *proc.Process, name string) float64 {
	t.Helper()
	resp, err := http.Get(p.URL + "/metrics")
	if err != nil {
		return -1 // killed
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return -1
}

func waitUntil(t *testing.T, what string, timeout time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Two notifier processes on the real cluster: both report status, one sweeps. The leader
// is SIGKILLed (its Lease is not released); the other takes the sweeper over within the
// election's bound and re-sends the next dead letter. Each dead letter is re-sent once,
// counted at the re-drive sink and on the Secret.
func TestTwoNotifiersOneSweeperAndATakeoverAfterSIGKILL(t *testing.T) {
	ns, own := cluster.Namespace(t), cluster.Namespace(t)
	bins, err := teststack.Build(t.TempDir(), "notifier")
	if err != nil {
		t.Fatal(err)
	}
	sink, redrive := testsink.Start(t), testsink.Start(t)
	env := map[string]string{"KUBECONFIG": cluster.Kubeconfig, "NAMESPACES": ns, "ASYNC_HELM_NAMESPACE": own,
		"K_SINK": sink.URL, "REDRIVE_SINK": redrive.URL, "EVENT_SIGNING_KEY": testKey, "EVENT_MAX_AGE": "1h",
		"SWEEP_INTERVAL": "300ms", "REDRIVE_AFTER": "1h", "REAPER_GRACE": "1h", "QUEUE_DEADLINE": "1h",
		"LEADER_LEASE_DURATION": "4s", "LEADER_RENEW_DEADLINE": "3s", "LEADER_RETRY_PERIOD": "500ms"}
	first := teststack.Run(t, bins["notifier"], env)
	waitUntil(t, "the first notifier leads", 30*time.Second, func() bool { return metric(t, first, "asynchelm_notifier_leader") == 1 })
	second := teststack.Run(t, bins["notifier"], env)
	h := newHelmSide(t, ns)
	h.reserveWithEvent(t, "web")

	// Both report, with the same stable id: the sink sees the transition at least once.
	pendingID := events.StatusEventID(ns, "web", 1, "pending-install", "req-web")
	sink.WaitFor(t, 20*time.Second, "pending-install reported", func(e []cloudevents.Event) bool { return has(e, pendingID) })
	deadLetter := func() {
		t.Helper()
		if ok, err := h.store.MarkDeadLettered(context.Background(), ns, release.SecretName("web", 1), "req-web", time.Now()); err != nil || !ok {
			t.Fatal(ok, err)
		}
	}
	deadLetter()
	redrive.WaitFor(t, 20*time.Second, "the leader re-sends the dead letter", func(e []cloudevents.Event) bool { return len(e) >= 1 })
	if n := metric(t, second, "asynchelm_notifier_sweep_passes_total"); n != 0 {
		t.Fatalf("the follower ran %v sweeper passes", n)
	}

	killed := time.Now()
	first.Kill() // SIGKILL: the Lease is left held until it expires
	deadLetter()
	waitUntil(t, "the survivor leads", 60*time.Second, func() bool { return metric(t, second, "asynchelm_notifier_leader") == 1 })
	leads := time.Since(killed)
	redrive.WaitFor(t, 60*time.Second, "the survivor re-sends the next dead letter", func(e []cloudevents.Event) bool { return len(e) >= 2 })
	t.Logf("after the SIGKILL the survivor led in %s and re-sent in %s (bound to lead: lease 4s + 2 x 2.2 x retry 0.5s = 6.2s, plus API latency)",
		leads.Round(100*time.Millisecond), time.Since(killed).Round(100*time.Millisecond))
	// It sweeps on, and sends nothing twice.
	passes := metric(t, second, "asynchelm_notifier_sweep_passes_total")
	waitUntil(t, "more passes", 30*time.Second, func() bool { return metric(t, second, "asynchelm_notifier_sweep_passes_total") >= passes+5 })
	m, err := h.store.ReleaseMeta(context.Background(), ns, release.SecretName("web", 1))
	if err != nil {
		t.Fatal(err)
	}
	if n, sent := len(redrive.Events()), m.Annotations[release.AnnotationSent]; n != 2 || sent != "2" {
		t.Errorf("%d re-sends (sent=%q on the Secret) for 2 dead letters", n, sent)
	}
	// And it goes on reporting.
	h.set(t, "web", 1, helmrelease.StatusDeployed, "Install complete")
	deployedID := events.StatusEventID(ns, "web", 1, "deployed", "req-web")
	sink.WaitFor(t, 20*time.Second, "deployed reported by the survivor", func(e []cloudevents.Event) bool { return has(e, deployedID) })
}
