package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/eventing"
	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/release"
)

// cpuMs is the unit of a CPU-time figure: milliseconds of CPU per unit of work.
const cpuMs = "ms CPU"

// cpuSection (issue 45): what a 201 costs in CPU, beside what a raw create of the
// reservation's size costs. Submit sends its events to a Broker of its own namespace
// (config/knative's Broker and Triggers, every subscriber a sink that acknowledges), so the
// whole stack of a 201 is submit, the API server, etcd and the Broker's processes; a raw
// create's stack is the API server, etcd and the same Broker processes (idle for it: their
// share is what the cluster's other users cost during the window). Both sides run open loop
// at -cpu-rate for -cpu-for, -repeats times in alternating order; the verdict is the median
// repetition's. The API server and etcd serve everything else on the cluster too: that load
// falls on both sides alike per second, and both sides last as long.
func (b *bench) cpuSection(ctx context.Context) error {
	ns, cleanup, err := b.namespace(ctx, "cpu")
	if err != nil {
		return err
	}
	defer cleanup()
	var delivered atomic.Int64
	s, err := newSink(func(*http.Request, []byte) { delivered.Add(1) })
	if err != nil {
		return err
	}
	defer s.close()
	brokerURL, brokerPids, err := b.brokerTo(ctx, ns, s.url)
	if err != nil {
		return err
	}
	p, err := b.start("submit", 0, "K_SINK="+brokerURL, "MAX_QUEUED=10000000", "MAX_QUEUED_PER_NAMESPACE=10000000", "MAX_RETAINED=0")
	if err != nil {
		return err
	}
	defer p.Stop()
	cluster, err := b.clusterCPU()
	if err != nil {
		return err
	}
	stack := cluster
	for name, pid := range brokerPids {
		stack = stack.with(name, pid)
	}
	withSubmit := stack.with("submit", p.Pid())
	tiny := b.charts.ChartURL("tiny", "0.1.0")
	c := newSubmitClient(p.URL, b.token, 1000)
	req := func(name string) api.ReleaseRequest {
		return api.ReleaseRequest{Name: name, Namespace: ns, ChartURL: tiny, Values: map[string]any{"message": "bench"}}
	}
	if err := b.retryNamespace(ctx, func() error { return c.install(ctx, req("warm")) }); err != nil {
		return fmt.Errorf("warm-up install: %w", err)
	}
	tmpl, err := b.cl.Typed.CoreV1().Secrets(ns).Get(ctx, release.SecretName("warm", 1), metav1.GetOptions{})
	if err != nil {
		return err
	}
	rawNS, rawCleanup, err := b.namespace(ctx, "cpuraw")
	if err != nil {
		return err
	}
	defer rawCleanup()
	var own, whole repeated
	var lastNote string
	for rep := 0; rep < b.o.repeats; rep++ {
		runRaw := func() (map[string]time.Duration, int) {
			before := stack.read()
			r := openLoop(ctx, b.o.cpuRate, b.o.cpuFor, 1000, func(i int) error {
				return b.rawCreate(ctx, rawNS, tmpl, fmt.Sprintf("raw%d-%d", rep, i))
			})
			return stack.since(before), r.ok
		}
		runSubmit := func() (map[string]time.Duration, int) {
			before, sent := withSubmit.read(), delivered.Load()
			r := openLoop(ctx, b.o.cpuRate, b.o.cpuFor, 1000, func(i int) error {
				return c.install(ctx, req(fmt.Sprintf("s%d-%d", rep, i)))
			})
			// Each accepted event's delivery through the Broker is part of its cost.
			deadline := time.Now().Add(10 * time.Second)
			for delivered.Load()-sent < int64(r.ok) && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			return withSubmit.since(before), r.ok
		}
		var rawCPU, subCPU map[string]time.Duration
		var rawN, subN int
		if rep%2 == 0 {
			rawCPU, rawN = runRaw()
			subCPU, subN = runSubmit()
		} else {
			subCPU, subN = runSubmit()
			rawCPU, rawN = runRaw()
		}
		b.purge(ns)
		own.add(msPer(subCPU["submit"], subN), msPer(rawCPU["apiserver"], rawN))
		whole.add(msPer(sumOf(subCPU), subN), msPer(sumOf(rawCPU), rawN))
		lastNote = fmt.Sprintf("last: 201 %s; raw %s", cpuNote(subCPU, subN), cpuNote(rawCPU, rawN))
		b.logf("  CPU per 201 (%d accepted), ms: %s", subN, cpuNote(subCPU, subN))
		b.logf("  CPU per raw create (%d), ms: %s", rawN, cpuNote(rawCPU, rawN))
	}
	rate := fmt.Sprintf("open loop %d/s for %s", b.o.cpuRate, b.o.cpuFor)
	b.compareRepeated("cpu", "CPU per 201: submit's own ("+rate+")", &own, cpuMs, "API server's CPU per raw create",
		"<= 0.5x", atMost(0.5), "load "+loadAvg())
	b.compareRepeated("cpu", "CPU per 201: submit, API server, etcd, Broker", &whole, cpuMs,
		"API server, etcd, Broker per raw create", "<= 1.5x", atMost(1.5), lastNote)
	return nil
}

// brokerTo wires config/knative's Broker and Triggers into ns with every subscriber at
// sink, and returns the Broker's URL and the pids of the Knative processes on an event's path.
func (b *bench) brokerTo(ctx context.Context, ns, sink string) (string, cpuSet, error) {
	root, err := os.Getwd()
	if err != nil {
		return "", nil, err
	}
	local, err := eventing.Open(eventing.Dir(root), b.kubeconfig)
	if err != nil {
		return "", nil, err
	}
	w, err := local.Wire(ctx, b.cl.Config, eventing.Options{Namespace: ns, ConfigDir: filepath.Join(root, "config", "knative"),
		Addresses: map[string]string{"submit": sink, "executor": sink, "notifier": sink}, Timeout: 2 * time.Minute})
	if err != nil {
		return "", nil, fmt.Errorf("wire a Broker into %s: %w", ns, err)
	}
	// The probe Trigger is the local wiring's readiness check, not part of a deployment: without
	// it each event crosses the channel to config/knative's Triggers only, as on a cluster.
	if err := w.DropProbe(ctx, 2*time.Minute); err != nil {
		return "", nil, err
	}
	pids := cpuSet{}
	for _, name := range []string{"broker-ingress", "broker-filter", "imc-dispatcher"} {
		if pid := local.Pids[name]; pid != 0 {
			pids[name] = pid
		}
	}
	return w.BrokerURL, pids, nil
}
