package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/testcharts"
	"github.com/async-helm/async-helm/internal/testsink"
	"github.com/async-helm/async-helm/internal/teststack"
	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/submitclient"
)

// The executor is SIGKILLed in the middle of an install and the Trigger does not redeliver:
// the event is dead-lettered to the notifier, whose sweeper sends the revision's stored
// event again; the restarted executor takes the expired lease over and deploys it, once.
func TestLostWorkIsDrivenAgainAfterTheExecutorIsKilled(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	charts := testcharts.Start(t)
	sink := testsink.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	key := "e2e-signing-key-e2e-signing-key-e2e-signing-key"
	common := map[string]string{"KUBECONFIG": cluster.Kubeconfig, "ALLOW_LOOPBACK_CHARTS": "true", "LEASE_DURATION": "3s",
		"EVENT_SIGNING_KEY": key}
	// Knative would redeliver the killed delivery to the restarted executor 2 s later (the
	// Trigger's backoff); this test makes the first failure final, so the event is
	// dead-lettered to the notifier at once.
	ports, w := wire(t, sink.URL, map[string]map[string]any{"executor": {"retry": int64(0)}})
	executor := teststack.RunPort(t, bins["executor"], ports.Executor, common)
	with := func(extra map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range common {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	notifier := teststack.RunPort(t, bins["notifier"], ports.Notifier, with(map[string]string{"K_SINK": w.BrokerURL,
		"NAMESPACES": ns, "SWEEP_INTERVAL": "500ms", "REAPER_GRACE": "2s"}))
	submit := teststack.RunPort(t, bins["submit"], ports.Submit, with(map[string]string{"K_SINK": w.BrokerURL}))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("submit log:\n%s\nexecutor log:\n%s\nnotifier log:\n%s", tail(submit.Output()), tail(executor.Output()), tail(notifier.Output()))
		}
	})
	client := &submitclient.Client{Server: submit.URL, Token: cluster.Operator.BearerToken}

	if _, err := client.Install(ctx, api.ReleaseRequest{Name: "orphan", Namespace: ns, ChartURL: charts.ChartURL("tiny", "0.1.0"),
		Wait: true, WaitForJobs: true, Timeout: "5m"}); err != nil {
		t.Fatal(err)
	}
	// Kill the executor as soon as it works on the revision (its lease exists).
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := cluster.Client.CoordinationV1().Leases(ns).Get(ctx, release.SecretName("orphan", 1), metav1.GetOptions{}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the executor never took the lease")
		}
		time.Sleep(20 * time.Millisecond)
	}
	executor.Kill()
	killed := time.Now()
	time.Sleep(time.Second)
	if err := executor.Restart(); err != nil {
		t.Fatal(err)
	}
	for {
		rel, err := client.Get(ctx, ns, "orphan")
		if err == nil && rel.Info.Status.String() == "deployed" {
			t.Logf("deployed %s after the SIGKILL", time.Since(killed).Round(100*time.Millisecond))
			break
		}
		if err == nil && rel.Info.Status.String() == "failed" {
			t.Fatalf("failed: %s", rel.Info.Description)
		}
		if time.Since(killed) > 90*time.Second {
			t.Fatalf("not deployed 90 s after the kill: %v %v", rel, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	hist, err := client.History(ctx, ns, "orphan")
	if err != nil || len(hist) != 1 {
		t.Fatalf("history: %d revisions, %v", len(hist), err)
	}
	if !strings.Contains(notifier.Output(), "dead-lettered request") {
		t.Errorf("the notifier never saw the dead letter; its log:\n%s", tail(notifier.Output()))
	}
}
