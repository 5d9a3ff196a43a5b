package main

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/release"
)

// Redeliveries to the pod that runs a revision: Helm runs once. One copy waits for the run;
// the others are answered 503 at once (an open request each would be counted nowhere), and
// the Broker's retry of each after the run ended is acknowledged.
func TestSamePodRedeliveryRunsHelmOnce(t *testing.T) {
	r := newRig(t, Config{MaxParallel: 8})
	var actions atomic.Int64
	r.fn.svc.Observe = func(string, string, time.Duration) { actions.Add(1) }
	ns := cluster.Namespace(t)
	a := r.reserve(t, release.ActionInstall, ns, "once", chartsource.Ref{URL: r.charts.ChartURL("tiny", "0.1.0")}, nil,
		events.Options{Wait: true, WaitForJobs: true})
	var wg sync.WaitGroup
	codes := make([]int, 8)
	for i := range codes {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			codes[i] = r.deliver(t, a)
		}(i)
	}
	wg.Wait()
	ok := 0
	for i, c := range codes {
		switch c {
		case http.StatusOK:
			ok++
		case http.StatusServiceUnavailable:
			if again := r.deliver(t, a); again != http.StatusOK {
				t.Errorf("delivery %d: 503, then %d after the run, want 200", i, again)
			}
		default:
			t.Errorf("delivery %d: %d", i, c)
		}
	}
	if ok < 1 || ok > 2 {
		t.Errorf("%d of 8 concurrent deliveries answered 200 at once, want the run's and at most one waiting copy's", ok)
	}
	if n := actions.Load(); n != 1 {
		t.Fatalf("Helm ran %d times for 8 concurrent deliveries of one revision, want 1", n)
	}
	if st := r.get(t, ns, "once", 1).Info.Status; st != helmrelease.StatusDeployed {
		t.Fatalf("status %s", st)
	}
}

// An event whose request id is not the reservation's (a reused revision number) is
// acknowledged and ignored; the current one deploys.
func TestStaleEventForAReusedRevisionIsIgnored(t *testing.T) {
	r := newRig(t, Config{})
	var actions atomic.Int64
	r.fn.svc.Observe = func(string, string, time.Duration) { actions.Add(1) }
	ns := cluster.Namespace(t)
	a := r.reserve(t, release.ActionInstall, ns, "reused", chartsource.Ref{URL: r.charts.ChartURL("tiny", "0.1.0")}, nil, events.Options{})
	stale := a
	stale.RequestID = "an-older-request"
	if code := r.deliver(t, stale); code != http.StatusOK {
		t.Fatalf("stale event: %d, want 200 (acknowledged)", code)
	}
	if st := r.get(t, ns, "reused", 1).Info.Status; st != helmrelease.StatusPendingInstall || actions.Load() != 0 {
		t.Fatalf("a stale event ran Helm: status %s, %d actions", st, actions.Load())
	}
	if code := r.deliver(t, a); code != http.StatusOK {
		t.Fatalf("current event: %d", code)
	}
	if st := r.get(t, ns, "reused", 1).Info.Status; st != helmrelease.StatusDeployed {
		t.Fatalf("the current event left %s", st)
	}
}

// Deliveries cancelled mid-flight leave nothing behind that blocks the next one.
func TestCancelledDeliveriesDoNotStallTheEndpoint(t *testing.T) {
	r := newRig(t, Config{})
	ns := cluster.Namespace(t)
	// An accepted event whose reservation was taken back: handled without Helm.
	gone := events.Action{Action: release.ActionInstall, Namespace: ns, Name: "gone", Revision: 1,
		SecretName: release.SecretName("gone", 1), RequestID: "gone", Options: events.Options{Timeout: time.Minute}}
	e, err := events.NewAccepted(gone)
	if err != nil {
		t.Fatal(err)
	}
	var cancelled atomic.Int64
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for i := 0; i < 1000; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%5)*time.Millisecond)
			defer cancel()
			req, err := cehttp.NewHTTPRequestFromEvent(ctx, r.url, e)
			if err != nil {
				t.Error(err)
				return
			}
			if resp, err := http.DefaultClient.Do(req); err != nil {
				cancelled.Add(1)
			} else {
				resp.Body.Close()
			}
		}(i)
	}
	wg.Wait()
	t.Logf("%d of 1000 deliveries were cancelled mid-flight", cancelled.Load())
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c, err := cloudevents.NewClientHTTP()
	if err != nil {
		t.Fatal(err)
	}
	// A cancelled copy may still be leaving its join when this one arrives: that is answered
	// 503, which Knative retries, so it is retried here too; a stalled endpoint answers no
	// copy within the second.
	for {
		res := c.Send(cloudevents.ContextWithTarget(ctx, r.url), e)
		if cloudevents.IsACK(res) {
			break
		}
		var hr *cehttp.Result
		if !cloudevents.ResultAs(res, &hr) || hr.StatusCode != http.StatusServiceUnavailable || ctx.Err() != nil {
			t.Fatalf("a normal delivery after the cancelled ones: %v after %s", res, time.Since(start))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("answered in %s", time.Since(start))
}

// A lease taken over by another executor (ours lapsed) cancels the running action, and the
// revision is left to the new holder: not marked failed by the loser.
func TestLostLeaseCancelsTheAction(t *testing.T) {
	engines(t, func(t *testing.T, engine helmexec.Engine) {
		r := newRig(t, Config{HelmEngine: string(engine), LeaseDuration: 3 * time.Second})
		ns := cluster.SlowNamespace(t)
		a := r.reserve(t, release.ActionInstall, ns, "lost", chartsource.Ref{URL: r.charts.ChartURL("tiny", "0.1.0")}, nil,
			events.Options{Wait: true, Timeout: 5 * time.Minute})
		done := make(chan int, 1)
		go func() { done <- r.deliver(t, a) }()
		waitLease(t, ns, a.SecretName)
		ctx := context.Background()
		thief := "another-executor/after-expiry"
		for i := 0; ; i++ { // the executor renews concurrently: retry on conflict
			l, err := cluster.Client.CoordinationV1().Leases(ns).Get(ctx, a.SecretName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			now := metav1.NewMicroTime(time.Now())
			l.Spec.HolderIdentity, l.Spec.RenewTime = &thief, &now
			if _, err = cluster.Client.CoordinationV1().Leases(ns).Update(ctx, l, metav1.UpdateOptions{}); err == nil {
				break
			}
			if i > 20 {
				t.Fatal(err)
			}
		}
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("the action went on after its lease was taken over")
		}
		if st := r.get(t, ns, "lost", 1).Info.Status; st == helmrelease.StatusFailed {
			t.Errorf("the executor that lost the lease marked the revision failed")
		}
		l, err := cluster.Client.CoordinationV1().Leases(ns).Get(ctx, a.SecretName, metav1.GetOptions{})
		if err != nil || *l.Spec.HolderIdentity != thief {
			t.Errorf("the new holder's lease was touched: %v %v", l, err)
		}
	})
}
