package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/proc"
	"github.com/async-helm/async-helm/internal/testsink"
	"github.com/async-helm/async-helm/internal/teststack"
	"github.com/async-helm/async-helm/pkg/release"
)

// BenchmarkSweepPassAtScale: 10,000 reserved revisions (queued, never run, already
// reported) in 1,000 namespaces, the notifier watching those namespaces (NAMESPACES: on a
// shared cluster it must not sweep anyone else's). It reports one sweeper pass (seconds and
// API calls, from /metrics), the notifier's RSS, and the same pass as the notifier did it
// before it read caches (a LIST of pending revisions and one of tombstones per namespace,
// timed here). Run once:
//
//	go test -run NONE -bench SweepPassAtScale -benchtime 1x ./functions/notifier
//
// NOTIFIER_SCALE=<namespaces>x<per namespace> changes the size; NOTIFIER_BIN measures the
// RSS of another build.
func BenchmarkSweepPassAtScale(b *testing.B) {
	nsCount, per := 1000, 10
	if v := os.Getenv("NOTIFIER_SCALE"); v != "" {
		n, p, _ := strings.Cut(v, "x")
		nsCount, _ = strconv.Atoi(n)
		per, _ = strconv.Atoi(p)
	}
	own := cluster.Namespace(b) // first: with 1,000 namespaces to equip, a new one waits long for its ServiceAccount
	nss := scaleNamespaces(b, nsCount, per)
	bin := os.Getenv("NOTIFIER_BIN")
	if bin == "" {
		bins, err := teststack.Build(b.TempDir(), "notifier")
		if err != nil {
			b.Fatal(err)
		}
		bin = bins["notifier"]
	}
	sink, redrive := testsink.Start(b), testsink.Start(b)
	p, pid := startSlow(b, bin, "KUBECONFIG="+cluster.Kubeconfig, "NAMESPACES="+strings.Join(nss, ","),
		"ASYNC_HELM_NAMESPACE="+own, "K_SINK="+sink.URL, "REDRIVE_SINK="+redrive.URL,
		"EVENT_SIGNING_KEY="+testKey, "SWEEP_INTERVAL=5s", "REDRIVE_AFTER=1h", "REAPER_GRACE=1h", "QUEUE_DEADLINE=10h")
	passes := func() float64 { return metric(b, p, "asynchelm_notifier_sweep_passes_total") }
	deadline := time.Now().Add(2 * time.Minute)
	if passes() < 0 { // a build without the pass metrics: its RSS once settled
		deadline = time.Now().Add(20 * time.Second)
	}
	for passes() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Second)
	}
	b.ReportMetric(float64(rss(pid))/(1<<20), "MiB-rss")
	if passes() >= 2 {
		b.ReportMetric(metric(b, p, "asynchelm_notifier_sweep_pass_seconds"), "s/pass")
		b.ReportMetric(metric(b, p, "asynchelm_notifier_sweep_pass_api_calls"), "calls/pass")
		b.ReportMetric(metric(b, p, "asynchelm_notifier_sweep_pass_pending"), "pending")
	}
	before, calls := oldPass(b, nss)
	b.ReportMetric(before.Seconds(), "before-s/pass")
	b.ReportMetric(float64(calls), "before-calls/pass")
	if n := len(sink.Events()) + len(redrive.Events()); n != 0 {
		b.Errorf("%d events for revisions already reported and not due", n)
	}
}

// oldPass is the pass the notifier made before it read caches: per watched namespace a
// LIST of pending revisions and a LIST of tombstones.
func oldPass(b *testing.B, nss []string) (time.Duration, int) {
	store := newHelmSide(b, nss[0]).store
	t0 := time.Now()
	for _, ns := range nss {
		if _, err := store.PendingRevisions(context.Background(), ns); err != nil {
			b.Fatal(err)
		}
		if _, _, err := store.TombstonePage(context.Background(), ns, ""); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(t0), 2 * len(nss)
}

func rss(pid int) int64 {
	raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kib, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kib << 10
		}
	}
	return 0
}

// scaleNamespaces makes n namespaces of per reservations each, copies of one reservation
// marked as reported (no status event at start), deleted when the benchmark ends.
func scaleNamespaces(b *testing.B, n, per int) []string {
	ctx := context.Background()
	tmpl := newHelmSide(b, cluster.Namespace(b)) // the template
	tmpl.reserveWithEvent(b, "r")
	sec, err := cluster.Client.CoreV1().Secrets(tmpl.ns).Get(ctx, release.SecretName("r", 1), metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	prefix := fmt.Sprintf("nscale-%d", time.Now().Unix()%100000)
	nss := make([]string, n)
	var g errgroup.Group
	g.SetLimit(32)
	t0 := time.Now()
	for i := range n {
		nss[i] = fmt.Sprintf("%s-%d", prefix, i)
		g.Go(func() error { return scaleNamespace(ctx, nss[i], sec, per) })
	}
	b.Cleanup(func() {
		for _, ns := range nss {
			_ = cluster.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
		}
	})
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	b.Logf("%d namespaces of %d reservations written in %s", n, per, time.Since(t0).Round(time.Second))
	return nss
}

func scaleNamespace(ctx context.Context, ns string, tmpl *corev1.Secret, per int) error {
	if _, err := cluster.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{"async-helm.io/test": "true"}}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	for j := range per {
		s := &corev1.Secret{Type: tmpl.Type, Data: tmpl.Data, ObjectMeta: metav1.ObjectMeta{Namespace: ns, Labels: map[string]string{},
			Name: release.SecretName(fmt.Sprintf("r%d", j), 1), Annotations: map[string]string{release.AnnotationNotified: tmpl.Labels[release.LabelStatus]}}}
		for k, v := range tmpl.Labels {
			s.Labels[k] = v
		}
		s.Labels[release.LabelName] = fmt.Sprintf("r%d", j)
		if _, err := cluster.Client.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// startSlow runs the notifier until it answers /healthz, however long its informers take
// to sync (one LIST and watch per namespace and kind: at 1,000 namespaces more than
// proc.Start's 30 s on a loaded cluster).
func startSlow(b *testing.B, bin string, env ...string) (*proc.Process, int) {
	port, err := proc.FreePort()
	if err != nil {
		b.Fatal(err)
	}
	logPath := filepath.Join(b.TempDir(), "notifier.log")
	logf, err := os.Create(logPath)
	if err != nil {
		b.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin)
	cmd.Env = append(append(os.Environ(), fmt.Sprintf("PORT=%d", port)), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	p := &proc.Process{Bin: bin, Port: port, URL: fmt.Sprintf("http://127.0.0.1:%d", port)}
	for {
		if resp, err := http.Get(p.URL + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Since(t0) > 15*time.Minute {
			out, _ := os.ReadFile(logPath)
			b.Fatalf("notifier not healthy after 15 min:\n%s", out)
		}
		time.Sleep(500 * time.Millisecond)
	}
	b.Logf("notifier healthy (informers synced) after %s", time.Since(t0).Round(time.Second))
	b.ReportMetric(time.Since(t0).Seconds(), "s-to-healthy")
	return p, cmd.Process.Pid
}
