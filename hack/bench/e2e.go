package main

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/release"
)

// e2eSection: a burst of -burst installs through make run's stack (submit -> Knative ->
// one executor with -parallel slots), timed until the last is deployed, against the helm
// CLI installing the same chart the same number of times, -parallel at a time, with
// `helm install --wait --wait-for-jobs`. Both wait for the pods and the Job (Ready after
// 0.5 s on the local cluster; Helm polls readiness every 2 s, on both sides).
func (b *bench) e2eSection(ctx context.Context) error {
	const sec = "e2e"
	n, par := b.o.burst, b.o.parallel
	chartURL := b.charts.ChartURL("tiny", "0.1.0")

	// async-helm
	ns, st, done, err := b.stackIn(ctx, "e2e", stackOptions{slots: par})
	if err != nil {
		return err
	}
	defer done()
	c := newSubmitClient(st.Submit.URL, b.token, 50)
	req := func(name string) api.ReleaseRequest {
		return api.ReleaseRequest{Name: name, Namespace: ns, ChartURL: chartURL, Values: map[string]any{"message": "bench"},
			Wait: true, WaitForJobs: true, Timeout: "5m"}
	}
	// One install first: Knative's data path, the executor's chart cache and both sides'
	// discovery are warm for the timed burst, as they are for the CLI's binary on disk.
	if err := b.retryNamespace(ctx, func() error { return c.install(ctx, req("warm")) }); err != nil {
		return fmt.Errorf("warm-up install: %w", err)
	}
	if _, err := b.waitFinal(ctx, ns, 1, 5*time.Minute); err != nil {
		return err
	}
	t0 := time.Now()
	sent := closedLoop(n, min(n, 50), func(i int) error { return c.install(ctx, req(fmt.Sprintf("burst%d", i))) })
	b.logf("  burst of %d sent in %s (%s)", n, time.Since(t0).Round(time.Millisecond), sent.note())
	deployed, err := b.waitFinal(ctx, ns, n+1, 10*time.Minute)
	if err != nil {
		return err
	}
	deployed-- // the warm-up
	asyncWall := time.Since(t0)

	// helm CLI, P at a time.
	hns, hcleanup, err := b.namespace(ctx, "e2ecli")
	if err != nil {
		return err
	}
	defer hcleanup()
	t1 := time.Now()
	cliOK, cliErr := b.helmBurst(ctx, hns, "burst", n, par, true)
	if cliErr != nil {
		return cliErr
	}
	cliWall := time.Since(t1)
	label := fmt.Sprintf("burst of %d installs, %d executor slots", n, par)
	base := fmt.Sprintf("helm install --wait, %d at a time", par)
	b.compare(sec, label+": completed installs/s", rateF(float64(deployed)/asyncWall.Seconds()), base, rateF(float64(cliOK)/cliWall.Seconds()),
		">= 0.9x", atLeast(0.9), fmt.Sprintf("%d of %d deployed", deployed, n))
	b.compare(sec, label+": time until the last is deployed", msF(asyncWall), base, msF(cliWall), "", nil, "")
	return nil
}

// waitFinal waits until ns holds want release revisions none of which is pending, and
// returns how many are deployed.
func (b *bench) waitFinal(ctx context.Context, ns string, want int, timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	// A list of thousands of records every 100 ms would load the API server under measure.
	every := 100 * time.Millisecond
	if want > 200 {
		every = 500 * time.Millisecond
	}
	for {
		list, err := b.cl.Metadata.Resource(release.SecretsResource).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: release.SelectorReleaseSecrets})
		if err != nil {
			return 0, err
		}
		deployed, final := 0, 0
		for _, it := range list.Items {
			switch st := it.Labels[release.LabelStatus]; {
			case st == "deployed":
				deployed++
				final++
			case !release.IsPending(st):
				final++
			}
		}
		if final >= want {
			return deployed, nil
		}
		if time.Now().After(deadline) {
			return deployed, fmt.Errorf("%d of %d revisions in %s final after %s", final, want, ns, timeout)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(every):
		}
	}
}
