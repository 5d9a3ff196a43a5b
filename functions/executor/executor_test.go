package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/lease"
)

func TestInstallAdoptsTheReservationAndUpgradeFollows(t *testing.T) {
	engines(t, func(t *testing.T, engine helmexec.Engine) {
		r := newRig(t, Config{HelmEngine: string(engine)})
		ns := cluster.Namespace(t)
		ctx := context.Background()
		tiny := chartsource.Ref{URL: r.charts.ChartURL("tiny", "0.1.0")}
		a := r.reserve(t, release.ActionInstall, ns, "web", tiny, map[string]any{"message": "one"},
			events.Options{Wait: true, WaitForJobs: true})
		reserved, err := cluster.Client.CoreV1().Secrets(ns).Get(ctx, a.SecretName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if code := r.deliver(t, a); code != http.StatusOK {
			t.Fatalf("deliver: %d", code)
		}
		rel := r.get(t, ns, "web", 1)
		if rel.Info.Status != helmrelease.StatusDeployed || rel.Manifest == "" || len(rel.Chart.Templates) == 0 {
			t.Fatalf("v1: status %s, manifest %d bytes", rel.Info.Status, len(rel.Manifest))
		}
		final, err := cluster.Client.CoreV1().Secrets(ns).Get(ctx, a.SecretName, metav1.GetOptions{})
		if err != nil || final.UID != reserved.UID {
			t.Fatalf("the reserved secret was replaced: uid %s -> %v (%v)", reserved.UID, final.UID, err)
		}
		if final.Labels[release.LabelRequestID] != a.RequestID || final.Labels["status"] != "deployed" {
			t.Errorf("labels %v", final.Labels)
		}
		dep, err := cluster.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil || dep.Status.AvailableReplicas != 1 {
			t.Fatalf("deployment after wait=true: %v available, err %v", dep.Status.AvailableReplicas, err)
		}
		if _, err := cluster.Client.CoordinationV1().Leases(ns).Get(ctx, a.SecretName, metav1.GetOptions{}); err == nil {
			t.Error("heartbeat lease left behind")
		}

		// A redelivery of the same event does not run Helm again.
		before := final.ResourceVersion
		if code := r.deliver(t, a); code != http.StatusOK {
			t.Fatalf("redelivery: %d", code)
		}
		again, _ := cluster.Client.CoreV1().Secrets(ns).Get(ctx, a.SecretName, metav1.GetOptions{})
		if again.ResourceVersion != before {
			t.Error("a duplicate delivery changed the release secret")
		}

		// Upgrade with changed values and the reused chart: revision 2, no third revision.
		up := r.reserve(t, release.ActionUpgrade, ns, "web", chartsource.Ref{}, map[string]any{"message": "two"},
			events.Options{Wait: true})
		if code := r.deliver(t, up); code != http.StatusOK {
			t.Fatalf("upgrade: %d", code)
		}
		if st := r.get(t, ns, "web", 2).Info.Status; st != helmrelease.StatusDeployed {
			t.Fatalf("v2 is %s", st)
		}
		if st := r.get(t, ns, "web", 1).Info.Status; st != helmrelease.StatusSuperseded {
			t.Errorf("v1 is %s, want superseded", st)
		}
		cm, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, "web-config", metav1.GetOptions{})
		if err != nil || cm.Data["message"] != "two" {
			t.Errorf("configmap after upgrade: %v %v", cm.Data, err)
		}
		hist, _ := r.store.History(ctx, ns, "web")
		if len(hist) != 2 {
			t.Errorf("%d revisions, want 2", len(hist))
		}
	})
}

func TestFailuresEndFailedWithTheReason(t *testing.T) {
	engines(t, func(t *testing.T, engine helmexec.Engine) {
		r := newRig(t, Config{HelmEngine: string(engine)})
		// A failed hook's reason is Kubernetes' under v3 and kstatus's under v4 (docs/design.md,
		// "Two engines").
		hookReason := map[helmexec.Engine]string{helmexec.EngineV3: "BackoffLimitExceeded", helmexec.EngineV4: "Job Failed"}[engine]
		cases := []struct {
			name   string
			chart  string
			slow   bool // pods Ready after 60 s
			opts   events.Options
			values map[string]any
			reason string
		}{
			{name: "bad template", chart: "badtemplate", reason: "value is required"},
			{name: "hook job fails", chart: "hookfail", opts: events.Options{Wait: true}, reason: hookReason},
			{name: "missing dependency", chart: "needsdep", reason: "missing in charts/ directory: redis"},
			{name: "timeout", chart: "tiny", slow: true, opts: events.Options{Wait: true, Timeout: 3 * time.Second}, reason: "timed out after 3s"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				ns := cluster.Namespace(t)
				if c.slow {
					ns = cluster.SlowNamespace(t)
				}
				a := r.reserve(t, release.ActionInstall, ns, "x", chartsource.Ref{URL: r.charts.ChartURL(c.chart, "0.1.0")}, c.values, c.opts)
				if code := r.deliver(t, a); code != http.StatusOK {
					t.Fatalf("deliver: %d", code)
				}
				rel := r.get(t, ns, "x", 1)
				if rel.Info.Status != helmrelease.StatusFailed || !strings.Contains(rel.Info.Description, c.reason) {
					t.Fatalf("status %s, description %q; want failed with %q", rel.Info.Status, rel.Info.Description, c.reason)
				}
			})
		}
	})
}

func TestLiveLeaseIsLeftAloneAndExpiredLeaseIsTakenOver(t *testing.T) {
	r := newRig(t, Config{})
	ns := cluster.Namespace(t)
	ctx := context.Background()
	a := r.reserve(t, release.ActionInstall, ns, "held", chartsource.Ref{URL: r.charts.ChartURL("tiny", "0.1.0")}, nil, events.Options{})
	other := &lease.Heartbeat{Client: cluster.Client, Holder: "other-executor", Duration: time.Minute}
	if held, err := other.Hold(ctx, ns, a.SecretName); held == nil || err != nil {
		t.Fatalf("hold: %v %v", held, err)
	}
	if code := r.deliver(t, a); code != http.StatusServiceUnavailable {
		t.Fatalf("deliver while held: %d, want 503 (redeliver later)", code)
	}
	if st := r.get(t, ns, "held", 1).Info.Status; st != helmrelease.StatusPendingInstall {
		t.Fatalf("status %s while another executor holds it", st)
	}
	// The other executor dies: its lease stops being renewed.
	l, err := cluster.Client.CoordinationV1().Leases(ns).Get(ctx, a.SecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	old := metav1.NewMicroTime(time.Now().Add(-2 * time.Minute))
	l.Spec.RenewTime = &old
	if _, err := cluster.Client.CoordinationV1().Leases(ns).Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if code := r.deliver(t, a); code != http.StatusOK {
		t.Fatalf("deliver after expiry: %d", code)
	}
	if st := r.get(t, ns, "held", 1).Info.Status; st != helmrelease.StatusDeployed {
		t.Fatalf("after taking over the expired lease: %s, want deployed", st)
	}
}

func TestBusyIsRetryableAndShutdownFailsActionsInFlight(t *testing.T) {
	engines(t, func(t *testing.T, engine helmexec.Engine) {
		r := newRig(t, Config{HelmEngine: string(engine), MaxParallel: 1})
		slow := cluster.SlowNamespace(t)
		ns := cluster.Namespace(t)
		tiny := chartsource.Ref{URL: r.charts.ChartURL("tiny", "0.1.0")}
		long := r.reserve(t, release.ActionInstall, slow, "long", tiny, nil, events.Options{Wait: true, Timeout: 10 * time.Minute})
		done := make(chan int, 1)
		go func() {
			done <- r.deliver(t, long)
		}()
		waitLease(t, slow, long.SecretName)
		next := r.reserve(t, release.ActionInstall, ns, "next", tiny, nil, events.Options{})
		if code := r.deliver(t, next); code != http.StatusTooManyRequests {
			t.Fatalf("second event while full: %d, want 429", code)
		}
		// SIGTERM: the action in flight ends failed with the reason, not pending.
		r.shutdown()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatal("the action did not end after shutdown")
		}
		rel := r.get(t, slow, "long", 1)
		if rel.Info.Status != helmrelease.StatusFailed || !strings.Contains(rel.Info.Description, "executor shut down") {
			t.Fatalf("after shutdown: %s %q", rel.Info.Status, rel.Info.Description)
		}
	})
}

func waitLease(t *testing.T, ns, name string) {
	t.Helper()
	for i := 0; i < 200; i++ {
		if _, err := cluster.Client.CoordinationV1().Leases(ns).Get(context.Background(), name, metav1.GetOptions{}); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the executor never took the lease")
}

func TestMalformedEventsAreRefused(t *testing.T) {
	r := newRig(t, Config{})
	e := cloudevents.NewEvent()
	e.SetID("x")
	e.SetSource("/test")
	e.SetType(events.TypeInstallAccepted)
	_ = e.SetData(cloudevents.ApplicationJSON, map[string]string{"name": "x"})
	if code := r.send(t, e); code != http.StatusBadRequest {
		t.Fatalf("malformed event: %d, want 400", code)
	}
	// A reservation that was taken back (submit answered 503) is acknowledged, not run.
	ns := cluster.Namespace(t)
	a := r.reserve(t, release.ActionInstall, ns, "gone", chartsource.Ref{URL: r.charts.ChartURL("tiny", "0.1.0")}, nil, events.Options{})
	if err := cluster.Client.CoreV1().Secrets(ns).Delete(context.Background(), a.SecretName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if code := r.deliver(t, a); code != http.StatusOK {
		t.Fatalf("event for an undone reservation: %d", code)
	}
	if _, err := cluster.Client.CoreV1().Secrets(ns).Get(context.Background(), a.SecretName, metav1.GetOptions{}); err == nil {
		t.Error("an event for an undone reservation installed the release")
	}
}

// With one CPU slot, installs waiting for readiness (slow pods: Ready after 60 s) give it
// back: all three are applied while every one of them still waits. Held through the wait,
// the first would have ended (timed out) before the second was applied.
func TestWaitingInstallsGiveTheCPUSlotBack(t *testing.T) {
	engines(t, func(t *testing.T, engine helmexec.Engine) {
		r := newRig(t, Config{HelmEngine: string(engine), MaxParallel: 4, CPUSlots: 1})
		ns := cluster.SlowNamespace(t)
		ctx := context.Background()
		tiny := chartsource.Ref{URL: r.charts.ChartURL("tiny", "0.1.0")}
		names := []string{"a", "b", "c"}
		codes := make(chan int, len(names))
		for _, n := range names {
			a := r.reserve(t, release.ActionInstall, ns, n, tiny, nil, events.Options{Wait: true, Timeout: 80 * time.Second})
			go func() { codes <- r.deliver(t, a) }()
		}
		deadline := time.Now().Add(2 * time.Minute)
		for {
			deps, err := cluster.Client.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			pending := 0
			for _, n := range names {
				rel, err := r.store.Get(ctx, ns, n, 1)
				if err != nil {
					t.Fatal(err)
				}
				if !release.IsPending(rel.Info.Status.String()) {
					t.Fatalf("%s ended (%s) before the three were applied: a waiting install held the CPU slot", n, rel.Info.Status)
				}
				pending++
			}
			if len(deps.Items) == len(names) && pending == len(names) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d applied after 2 minutes", len(deps.Items), len(names))
			}
			time.Sleep(100 * time.Millisecond)
		}
		r.shutdown() // the waits would last until their timeout; the actions end failed
		for range names {
			if code := <-codes; code != http.StatusOK {
				t.Errorf("delivery answered %d", code)
			}
		}
	})
}
