package main

import (
	"context"
	"fmt"
	"os/exec"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/localstack"
	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/release"
)

// burstSection (issue 28): -burst-installs installs of the tiny chart through make run's
// stack (Knative Broker and Triggers, the executor working with its default slots) from
// -burst-clients clients, then -burst-wait-installs with wait (fast pods). Time-to-201
// stands beside raw Secret creates of the reservation's size that a probe sends at
// -probe-rate per second during the same burst (the API server's answer under the same
// load); completed installs/s (first request to the last deployed) beside `helm install`
// of as many releases, -burst-clients processes at a time, with and without --wait.
func (b *bench) burstSection(ctx context.Context) error {
	ns, st, done, err := b.stackIn(ctx, "burst", stackOptions{})
	if err != nil {
		return err
	}
	defer done()
	c := newSubmitClient(st.Submit.URL, b.token, b.o.burstClients+1)
	// One install first (Knative's data path, the executor's chart cache, discovery warm, as
	// the CLI's binary is on disk). Its reservation, read at once, is the probe's template.
	if err := b.retryNamespace(ctx, func() error {
		return c.install(ctx, burstRequest(ns, "warm", b.charts.ChartURL("tiny", "0.1.0"), true))
	}); err != nil {
		return fmt.Errorf("warm-up install: %w", err)
	}
	tmpl, err := b.cl.Typed.CoreV1().Secrets(ns).Get(ctx, release.SecretName("warm", 1), metav1.GetOptions{})
	if err != nil {
		return err
	}
	b.logf("  probe template: the warm-up's record (%s), %d bytes of data", tmpl.Labels[release.LabelStatus], secretSize(tmpl))
	if _, err := b.waitFinal(ctx, ns, 1, 5*time.Minute); err != nil {
		return err
	}
	rawNS, rawCleanup, err := b.namespace(ctx, "burstraw")
	if err != nil {
		return err
	}
	defer rawCleanup()
	hns, hcleanup, err := b.namespace(ctx, "burstcli")
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
			// The previous run's pods would fill the local nodes: the with-wait run's pods
			// then stay Pending and its installs time out (seen: 129 Pending, 68 failed).
			b.clearWorkloads(ctx, ns, hns)
		}
		accepted, err := b.burstRun(ctx, burstTarget{c: c, st: st, ns: ns, rawNS: rawNS, cliNS: hns, tmpl: tmpl, have: have}, run.n, run.wait)
		if err != nil {
			return err
		}
		have += accepted
	}
	return nil
}

// burstTarget is where a burst goes: submit's client and namespace, the probe's namespace
// and template, the CLI's namespace, and how many revisions ns already holds.
type burstTarget struct {
	c                *submitClient
	st               *localstack.Stack
	ns, rawNS, cliNS string
	tmpl             *corev1.Secret
	have             int
}

func burstRequest(ns, name, chartURL string, wait bool) api.ReleaseRequest {
	r := api.ReleaseRequest{Name: name, Namespace: ns, ChartURL: chartURL, Values: map[string]any{"message": "bench"}, Timeout: "5m"}
	r.Wait, r.WaitForJobs = wait, wait
	return r
}

// burstRun: one burst through the stack with the probe running, then the CLI's. It returns
// how many installs were accepted (each left one revision in t.ns).
func (b *bench) burstRun(ctx context.Context, t burstTarget, n int, wait bool) (int, error) {
	mode, prefix := "no wait", "b"
	if wait {
		mode, prefix = "with wait (fast pods)", "w"
	}
	chartURL := b.charts.ChartURL("tiny", "0.1.0")
	probeCtx, stopProbe := context.WithCancel(ctx)
	probed := make(chan result, 1)
	go func() {
		probed <- openLoop(probeCtx, b.o.probeRate, time.Hour, 100, func(i int) error {
			return b.rawCreate(ctx, t.rawNS, t.tmpl, fmt.Sprintf("%sprobe%d", prefix, i))
		})
	}()
	stepsBefore, err := scrapeSteps(ctx, t.st)
	if err != nil {
		stopProbe()
		return 0, err
	}
	t0 := time.Now()
	sent := closedLoop(n, b.o.burstClients, func(i int) error {
		return t.c.install(ctx, burstRequest(t.ns, fmt.Sprintf("%s%d", prefix, i), chartURL, wait))
	})
	stopProbe()
	probe := <-probed
	steps, err := scrapeSteps(ctx, t.st)
	if err != nil {
		return 0, err
	}
	b.logf("  burst of %d (%s) accepted in %s (%s, %.0f/s); probe %s", n, mode, time.Since(t0).Round(time.Millisecond), sent.note(), sent.rate, probe.note())
	deployed, unfinished, err := b.waitBurst(ctx, t.ns, t.have+sent.ok)
	if err != nil {
		return 0, err
	}
	deployed -= t.have // earlier bursts and the warm-up, all deployed
	asyncWall := time.Since(t0)

	t1 := time.Now()
	ok, err := b.helmBurst(ctx, t.cliNS, prefix, n, b.o.burstClients, wait)
	if err != nil {
		return 0, err
	}
	cliWall := time.Since(t1)

	const sec = "burst"
	name := fmt.Sprintf("burst of %d, %s, %d clients", n, mode, b.o.burstClients)
	floor := fmt.Sprintf("raw create probe at %d/s during the burst", b.o.probeRate)
	target, check := "", (func(v, base float64) bool)(nil)
	if !wait {
		target, check = "<= 1.5x", atMost(1.5)
	}
	b.compare(sec, name+": time-to-201 p50", msF(sent.p50), floor+" p50", msF(probe.p50), "", nil, fmt.Sprintf("%s, %.0f accepted/s", sent.note(), sent.rate))
	b.compare(sec, name+": time-to-201 p99", msF(sent.p99), floor+" p99", msF(probe.p99), target, check, "probe "+probe.note())
	b.compare(sec, name+": submit's reservation create, mean", msF(steps.mean(stepsBefore, "reserve")), floor+" p50", msF(probe.p50), "", nil, steps.note(stepsBefore))
	cli := fmt.Sprintf("helm install%s, %d at a time", map[bool]string{true: " --wait --wait-for-jobs"}[wait], b.o.burstClients)
	b.compare(sec, name+": completed installs/s", rateF(float64(deployed)/asyncWall.Seconds()), cli, rateF(float64(ok)/cliWall.Seconds()),
		">= 0.9x", atLeast(0.9), fmt.Sprintf("%d of %d deployed%s", deployed, n, unfinished))
	b.compare(sec, name+": first request to the last deployed", msF(asyncWall), cli, msF(cliWall), "", nil, "")
	return sent.ok, nil
}

// waitBurst is waitFinal with -final-timeout: a burst that does not finish in time is
// reported with what was deployed by then and a note, not an error that loses the table.
func (b *bench) waitBurst(ctx context.Context, ns string, want int) (int, string, error) {
	deployed, err := b.waitFinal(ctx, ns, want, b.o.finalTimeout)
	if err != nil && ctx.Err() == nil {
		b.logf("  %v", err)
		return deployed, "; NOT FINISHED: " + err.Error(), nil
	}
	return deployed, "", err
}

// helmBurst installs n releases of tiny with the helm CLI, workers at a time, and returns
// how many succeeded.
func (b *bench) helmBurst(ctx context.Context, ns, prefix string, n, workers int, wait bool) (int, error) {
	var ok atomic.Int64
	err := parallel(n, workers, func(i int) error {
		args := []string{"install", fmt.Sprintf("%s%d", prefix, i), b.charts.Dir + "/tiny-0.1.0.tgz", "-n", ns, "--set", "message=bench", "--timeout", "5m"}
		if wait {
			args = append(args, "--wait", "--wait-for-jobs")
		}
		out, err := exec.CommandContext(ctx, b.o.helm, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("helm install %s%d: %v: %s", prefix, i, err, out)
		}
		ok.Add(1)
		return nil
	})
	return int(ok.Load()), err
}

func secretSize(s *corev1.Secret) int {
	n := 0
	for _, v := range s.Data {
		n += len(v)
	}
	return n
}

// clearWorkloads deletes the Deployments and Jobs earlier runs installed in namespaces (the
// release records stay) and waits, up to 3 minutes, until their pods are gone.
func (b *bench) clearWorkloads(ctx context.Context, namespaces ...string) {
	bg := metav1.DeletePropagationBackground
	del := metav1.DeleteOptions{PropagationPolicy: &bg}
	for _, ns := range namespaces {
		apps, batch := b.cl.Typed.AppsV1().Deployments(ns), b.cl.Typed.BatchV1().Jobs(ns)
		if err := apps.DeleteCollection(ctx, del, metav1.ListOptions{}); err != nil {
			b.logf("  clear Deployments of %s: %v", ns, err)
		}
		if err := batch.DeleteCollection(ctx, del, metav1.ListOptions{}); err != nil {
			b.logf("  clear Jobs of %s: %v", ns, err)
		}
	}
	t0, deadline := time.Now(), time.Now().Add(3*time.Minute)
	for time.Now().Before(deadline) {
		left := 0
		for _, ns := range namespaces {
			pods, err := b.cl.Typed.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err == nil {
				left += len(pods.Items)
			}
		}
		if left == 0 {
			break
		}
		time.Sleep(2 * time.Second)
	}
	b.logf("  cleared the previous run's workloads in %s", time.Since(t0).Round(time.Second))
}
