package e2e

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/localbroker"
	"github.com/async-helm/async-helm/internal/testcharts"
	"github.com/async-helm/async-helm/internal/testsink"
	"github.com/async-helm/async-helm/internal/teststack"
	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/submitclient"
)

// The executor is SIGKILLed in the middle of an install and never comes back: the notifier's
// reaper fails the revision once the executor's lease has expired, and reports it.
func TestReaperFailsTheReleaseOfAKilledExecutor(t *testing.T) {
	t.Parallel()
	ns := cluster.SlowNamespace(t) // pods take 90 s: the install is still running when the executor dies
	charts := testcharts.Start(t)
	sink := testsink.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	common := map[string]string{"KUBECONFIG": cluster.Kubeconfig, "ALLOW_LOOPBACK_CHARTS": "true", "LEASE_DURATION": "3s"}
	executor := teststack.Run(t, bins["executor"], common)
	broker, err := localbroker.New(ctx, executor.URL)
	if err != nil {
		t.Fatal(err)
	}
	broker.Retries = 0 // nobody redelivers: only the reaper can end this revision
	b := httptest.NewServer(broker)
	t.Cleanup(b.Close)
	submit := teststack.Run(t, bins["submit"], map[string]string{"KUBECONFIG": cluster.Kubeconfig, "ALLOW_LOOPBACK_CHARTS": "true", "K_SINK": b.URL})
	teststack.Run(t, bins["notifier"], map[string]string{"KUBECONFIG": cluster.Kubeconfig, "K_SINK": sink.URL, "NAMESPACES": ns,
		"REAPER_GRACE": "2s", "REAPER_INTERVAL": "500ms"})
	client := &submitclient.Client{Server: submit.URL, Token: cluster.Admin.BearerToken}

	if _, err := client.Install(ctx, api.ReleaseRequest{Name: "orphan", Namespace: ns, ChartURL: charts.ChartURL("tiny", "0.1.0"), Wait: true, Timeout: "10m"}); err != nil {
		t.Fatal(err)
	}
	// Wait until the executor works on it (its lease exists), then kill it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := cluster.Client.CoordinationV1().Leases(ns).Get(ctx, "sh.helm.release.v1.orphan.v1", metav1.GetOptions{}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the executor never took the lease")
		}
		time.Sleep(50 * time.Millisecond)
	}
	executor.Kill()

	failed := events.StatusEventID(ns, "orphan", 1, "failed")
	evs := sink.WaitFor(t, 60*time.Second, "the reaper's failed event", func(e []cloudevents.Event) bool { return index(e, failed) >= 0 })
	sc, err := events.ParseStatus(evs[index(evs, failed)])
	if err != nil || !strings.Contains(sc.Reason, "reaper") {
		t.Fatalf("failed event: %+v %v", sc, err)
	}
	rel, err := client.Get(ctx, ns, "orphan")
	if err != nil || rel.Info.Status.String() != "failed" || !strings.Contains(rel.Info.Description, "no executor worked on revision 1") {
		t.Fatalf("release after the reaper: %v %q %v", rel.Info.Status, rel.Info.Description, err)
	}
}
