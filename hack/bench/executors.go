package main

import (
	"context"
	"fmt"
	"time"
)

// executorsSection (issue 30): completed installs/s with 1, 2 and 3 executors (-executors)
// behind a round-robin (internal/loadbalance: a Knative Service's endpoints spread
// deliveries over its pods the same way), in the same run. Each run is make run's stack in
// a namespace of its own, -executor-installs installs with wait (fast pods: waiting, not
// CPU, dominates) from -burst-clients clients, timed from the first request to the last
// deployed. Executors keep their default slots.
func (b *bench) executorsSection(ctx context.Context) error {
	var base float64
	for _, k := range b.o.executorCounts {
		deployed, wall, spread, err := b.executorsRun(ctx, k)
		if err != nil {
			return err
		}
		rate := float64(deployed) / wall.Seconds()
		if base == 0 {
			base = rate
		}
		n := b.o.executorInstalls
		b.compare("executors", fmt.Sprintf("%d executor(s), %d installs with wait, %d clients: completed installs/s", k, n, b.o.burstClients),
			rateF(rate), fmt.Sprintf("%d executor(s), same run", b.o.executorCounts[0]), rateF(base), "", nil,
			fmt.Sprintf("%d of %d deployed in %s; deliveries: %s", deployed, n, wall.Round(100*time.Millisecond), spread))
	}
	return nil
}

// executorsRun is one run of the executors section with k executors: how many of the
// installs were deployed, the time from the first request to the last final, and how the
// balancer spread the deliveries (warm-ups and redeliveries included).
func (b *bench) executorsRun(ctx context.Context, k int) (int, time.Duration, string, error) {
	ns, st, done, err := b.stackIn(ctx, fmt.Sprintf("exec%d", k), stackOptions{executors: k})
	if err != nil {
		return 0, 0, "", err
	}
	defer done()
	c := newSubmitClient(st.Submit.URL, b.token, b.o.burstClients)
	chartURL := b.charts.ChartURL("tiny", "0.1.0")
	// One warm-up install per executor: the round-robin gives each one of them.
	for i := 0; i < k; i++ {
		if err := b.retryNamespace(ctx, func() error { return c.install(ctx, burstRequest(ns, fmt.Sprintf("warm%d", i), chartURL, true)) }); err != nil {
			return 0, 0, "", fmt.Errorf("warm-up install: %w", err)
		}
	}
	if _, err := b.waitFinal(ctx, ns, k, 5*time.Minute); err != nil {
		return 0, 0, "", err
	}
	n := b.o.executorInstalls
	t0 := time.Now()
	sent := closedLoop(n, b.o.burstClients, func(i int) error {
		return c.install(ctx, burstRequest(ns, fmt.Sprintf("e%d", i), chartURL, true))
	})
	if sent.ok != sent.n {
		return 0, 0, "", fmt.Errorf("%d executor(s): %s", k, sent.note())
	}
	deployed, unfinished, err := b.waitBurst(ctx, ns, k+n)
	return deployed - k, time.Since(t0), st.Executor.Spread() + unfinished, err
}
