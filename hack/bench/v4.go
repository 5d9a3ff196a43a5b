package main

import (
	"context"
	"fmt"
	"os/exec"
	"sync/atomic"
	"time"

	"github.com/async-helm/async-helm/internal/testcluster"
)

// v4Section (issue 46): the executor on the Helm v4 engine (HELM_ENGINE=v4) completing
// -burst-installs installs of tiny through make run's stack without wait, then
// -burst-wait-installs with wait (fast pods), from -burst-clients clients; beside the helm v4
// CLI (tools/helmv4) installing as many, -burst-clients processes at a time, with
// --wait=watcher where the executor waits (the same kstatus wait) and client-side apply (the
// engine's default).
func (b *bench) v4Section(ctx context.Context) error {
	helm4, err := testcluster.HelmV4CLI()
	if err != nil {
		return fmt.Errorf("helm v4 CLI: %w", err)
	}
	ns, st, done, err := b.stackIn(ctx, "v4", stackOptions{engine: "v4"})
	if err != nil {
		return err
	}
	defer done()
	c := newSubmitClient(st.Submit.URL, b.token, b.o.burstClients+1)
	chartURL := b.charts.ChartURL("tiny", "0.1.0")
	if err := b.retryNamespace(ctx, func() error { return c.install(ctx, burstRequest(ns, "warm", chartURL, true)) }); err != nil {
		return fmt.Errorf("warm-up install: %w", err)
	}
	if _, err := b.waitFinal(ctx, ns, 1, 5*time.Minute); err != nil {
		return err
	}
	hns, hcleanup, err := b.namespace(ctx, "v4cli")
	if err != nil {
		return err
	}
	defer hcleanup()
	have := 1
	for _, run := range []struct {
		n    int
		wait bool
	}{{b.o.burstInstalls, false}, {b.o.burstWaitInstalls, true}} {
		if run.n <= 0 {
			continue
		}
		if have > 1 {
			b.clearWorkloads(ctx, ns, hns)
		}
		accepted, err := b.v4Run(ctx, v4Target{c: c, ns: ns, cliNS: hns, helm: helm4, have: have}, run.n, run.wait)
		if err != nil {
			return err
		}
		have += accepted
	}
	return nil
}

// v4Target is where a v4 run goes: submit's client and namespace, the CLI's binary and
// namespace, and how many revisions ns holds already.
type v4Target struct {
	c               *submitClient
	ns, cliNS, helm string
	have            int
}

// v4Run is one burst through the v4 engine's stack and then the helm v4 CLI's; it returns
// how many installs submit accepted.
func (b *bench) v4Run(ctx context.Context, t v4Target, n int, wait bool) (int, error) {
	mode, prefix := "no wait", "v"
	if wait {
		mode, prefix = "with wait (fast pods)", "vw"
	}
	chartURL := b.charts.ChartURL("tiny", "0.1.0")
	t0 := time.Now()
	sent := closedLoop(n, b.o.burstClients, func(i int) error {
		return t.c.install(ctx, burstRequest(t.ns, fmt.Sprintf("%s%d", prefix, i), chartURL, wait))
	})
	deployed, unfinished, err := b.waitBurst(ctx, t.ns, t.have+sent.ok)
	if err != nil {
		return 0, err
	}
	deployed -= t.have
	asyncWall := time.Since(t0)
	b.logf("  v4 engine: %d installs (%s) deployed %d in %s", n, mode, deployed, asyncWall.Round(time.Millisecond))

	t1 := time.Now()
	ok, err := b.helm4Burst(ctx, t, prefix, n, wait)
	if err != nil {
		return 0, err
	}
	cliWall := time.Since(t1)
	name := fmt.Sprintf("v4 engine, %d installs, %s, %d clients", n, mode, b.o.burstClients)
	cli := fmt.Sprintf("helm v4 install%s, %d at a time", map[bool]string{true: " --wait=watcher --wait-for-jobs"}[wait], b.o.burstClients)
	b.compare("v4", name+": completed installs/s", rateF(float64(deployed)/asyncWall.Seconds()), cli, rateF(float64(ok)/cliWall.Seconds()),
		">= 0.9x", atLeast(0.9), fmt.Sprintf("%d of %d deployed%s", deployed, n, unfinished))
	b.compare("v4", name+": first request to the last deployed", msF(asyncWall), cli, msF(cliWall), "", nil, "")
	return sent.ok, nil
}

// helm4Burst is helmBurst with the helm v4 CLI.
func (b *bench) helm4Burst(ctx context.Context, t v4Target, prefix string, n int, wait bool) (int, error) {
	var ok atomic.Int64
	err := parallel(n, b.o.burstClients, func(i int) error {
		args := []string{"install", fmt.Sprintf("%s%d", prefix, i), b.charts.Dir + "/tiny-0.1.0.tgz", "-n", t.cliNS,
			"--set", "message=bench", "--timeout", "5m", "--server-side=false"} // client-side, as the engine's default
		if wait {
			args = append(args, "--wait=watcher", "--wait-for-jobs")
		}
		out, err := exec.CommandContext(ctx, t.helm, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("helm v4 install %s%d: %v: %s", prefix, i, err, out)
		}
		ok.Add(1)
		return nil
	})
	return int(ok.Load()), err
}
