package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	helmtime "helm.sh/helm/v3/pkg/time"

	"github.com/async-helm/async-helm/internal/operator"
	"github.com/async-helm/async-helm/internal/proc"
	"github.com/async-helm/async-helm/pkg/kube"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

// bigClusterSection (issue 45): the memory of a big cluster. A second local cluster of its
// own (tools/localcluster under -big-dir, stopped and removed afterwards: the shared
// cluster's other users would list every Secret written here) gets -big-releases releases
// of -big-revisions revisions in -big-namespaces namespaces, written directly with Helm's
// Secrets driver (nine in ten as the helm CLI labels them, one in ten with async-helm's
// labels), and -big-pending pending reservations of ours. Then a fresh submit, one executor
// and 2 notifiers with NAMESPACES unset, as shipped: each one's peak RSS against 0.8x its
// memory limit in config/knative; submit's time-to-201 against the same four processes on
// a third local cluster that stays empty (-big-dir with "-empty" appended), timed in the
// same rounds; the
// all-namespaces list of a user who may read -scale-readable namespaces.
func (b *bench) bigClusterSection(ctx context.Context) error {
	kubeconfig, down, err := b.startBigCluster(ctx, b.o.bigDir)
	if err != nil {
		return err
	}
	defer down()
	// A baseline timed before the writes was timed at another load of the machine (20
	// then, 30-36 at scale, rounds 3x-50x): the empty cluster is timed beside the big one.
	emptyConfig, downEmpty, err := b.startBigCluster(ctx, b.o.bigDir+"-empty")
	if err != nil {
		return err
	}
	defer downEmpty()
	big, err := b.onCluster(ctx, kubeconfig)
	if err != nil {
		return err
	}
	empty, err := b.onCluster(ctx, emptyConfig)
	if err != nil {
		return err
	}
	defer func() { b.rows = append(b.rows, big.rows[len(b.rows):]...) }()
	return big.bigCluster(ctx, empty)
}

// startBigCluster starts another local cluster under dir with the shared cluster's binaries.
func (b *bench) startBigCluster(ctx context.Context, under string) (string, func(), error) {
	bin := filepath.Join(filepath.Dir(b.kubeconfig), "bin")
	dir, err := filepath.Abs(under)
	if err != nil {
		return "", nil, err
	}
	run := func(verb string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "localcluster"), verb, "-dir", dir, "-bin", bin)
		cmd.Dir = dir
		return cmd.CombinedOutput()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, err
	}
	t0 := time.Now()
	if out, err := run("up"); err != nil {
		_, _ = run("down")
		return "", nil, fmt.Errorf("local cluster under %s: %v: %s", dir, err, out)
	}
	b.logf("  local cluster up under %s in %s", dir, time.Since(t0).Round(time.Second))
	return filepath.Join(dir, "kubeconfig"), func() {
		// A cancelled run still stops its clusters.
		cmd := exec.Command(filepath.Join(bin, "localcluster"), "down", "-dir", dir, "-bin", bin)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			b.logf("  local cluster under %s down: %v: %s", dir, err, out)
		}
		_ = os.RemoveAll(dir)
	}, nil
}

// onCluster is a copy of b that works against another cluster: its clients, kubeconfig
// and operator token; rows it adds follow b's.
func (b *bench) onCluster(ctx context.Context, kubeconfig string) (*bench, error) {
	cl, err := kube.Open(kubeconfig, kube.Unlimited)
	if err != nil {
		return nil, err
	}
	big := *b
	big.cl, big.kubeconfig = cl, kubeconfig
	big.rows = append([]row(nil), b.rows...)
	if big.token, err = operator.Token(ctx, cl.Typed, 6*time.Hour); err != nil {
		return nil, err
	}
	return &big, big.ownNamespace(ctx)
}

func (b *bench) bigCluster(ctx context.Context, empty *bench) error {
	const sec = "bigcluster"
	var events atomic.Int64
	first, _, stopFirst, err := b.submitWithSink(func(*http.Request, []byte) { events.Add(1) })
	if err != nil {
		return err
	}
	defer stopFirst()
	probeNS, cleanup, err := b.namespace(ctx, "bigprobe")
	if err != nil {
		return err
	}
	defer cleanup()
	beside, err := empty.emptyBeside(ctx)
	if err != nil {
		return err
	}
	defer beside.stop()
	nss, _, err := b.manyNamespaces(ctx, b.o.bigNamespaces)
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := b.writeHelmRecords(ctx, nss); err != nil {
		return err
	}
	b.logf("  %d release Secrets written in %s", b.o.bigReleases*b.o.bigRevisions, time.Since(t0).Round(time.Second))
	t0 = time.Now()
	if err := b.reserveAcross(ctx, newSubmitClient(first.URL, b.token, b.o.clients), nss, 0, b.o.bigPending); err != nil {
		return err
	}
	b.logf("  %d pending reserved in %s", b.o.bigPending, time.Since(t0).Round(time.Second))
	stopFirst()

	procs, statuses, stopProcs, err := b.freshProcs(ctx, sec)
	defer stopProcs()
	if err != nil {
		return err
	}
	where := fmt.Sprintf("%d release Secrets in %d namespaces and %d pending", b.o.bigReleases*b.o.bigRevisions, len(nss), b.o.bigPending)
	sent, t0 := statuses.Load(), time.Now()
	if err := b.admissionBeside(ctx, sec, where, newSubmitClient(procs["submit"].URL, b.token, 1), probeNS, beside); err != nil {
		return err
	}
	// What the notifiers still did meanwhile: their start-up backlog, the leader's re-sends.
	b.logf("  the notifiers sent %d events while admission was timed (%s)", statuses.Load()-sent, time.Since(t0).Round(time.Second))
	if err := b.scaleList(ctx, procs["submit"].URL, probeNS, nss); err != nil {
		return err
	}
	return b.peakRSS(sec, procs, where)
}

// freshProcs starts the stack (stackProcs) on the full cluster and waits for the
// notifiers to report what was written while none ran before admission is timed: a steady
// cluster of that size, not its notifiers' first minutes.
func (b *bench) freshProcs(ctx context.Context, sec string) (map[string]*proc.Process, *atomic.Int64, func(), error) {
	// The start-up is measured, not cut at proc's default bound.
	b.startLimit = bigStartLimit
	procs, statuses, stop, err := b.stackProcs("big-")
	if err != nil {
		return nil, nil, stop, err
	}
	drained := b.settleWithin(ctx, statuses, bigSettleLimit)
	b.logf("  submit, executor, 2 notifiers started; notifiers quiet after %s (%d events)", drained.Round(time.Second), statuses.Load())
	b.startupRows(sec, procs, statuses.Load(), drained)
	return procs, statuses, stop, nil
}

// stackProcs starts submit, an executor and 2 notifiers as shipped (NAMESPACES unset: their
// first list is of everything; GC settings from config/knative), their logs and profiles
// named with prefix. It returns them, the count of status events their sink received,
// and a func that stops those started. The same stack runs on both clusters, so that the
// notifiers' and the executor's share of the CPU is on both sides of a ratio.
func (b *bench) stackProcs(prefix string) (map[string]*proc.Process, *atomic.Int64, func(), error) {
	statuses, resent := &atomic.Int64{}, &atomic.Int64{}
	procs := map[string]*proc.Process{}
	sink, err := newSink(func(*http.Request, []byte) { statuses.Add(1) })
	if err != nil {
		return nil, nil, func() {}, err
	}
	// The leader's re-sends of the unconsumed reservations go on for as long as they stay
	// pending: counted apart, so that the status events alone say when the start-up ends.
	redrive, err := newSink(func(*http.Request, []byte) { resent.Add(1) })
	if err != nil {
		sink.close()
		return nil, nil, func() {}, err
	}
	stop := func() {
		for _, p := range procs {
			if p != nil { // a start that failed left nil in its place
				p.Stop()
			}
		}
		sink.close()
		redrive.close()
		b.logf("  the leading notifier (%s) re-sent %d unconsumed reservations in all", prefix+"notifier", resent.Load())
	}
	gomem := map[string][]string{}
	for _, fn := range []string{"submit", "executor", "notifier"} {
		if gomem[fn], err = knativeGCEnv(fn); err != nil {
			return nil, nil, stop, err
		}
	}
	if procs["submit"], err = b.startAs("submit", prefix+"submit", 0, slices.Concat(submitEnv(sink.url), gomem["submit"], []string{heapEnv(prefix + "submit")})...); err != nil {
		return nil, nil, stop, err
	}
	if procs["executor"], err = b.startAs("executor", prefix+"executor", 0, slices.Concat(gomem["executor"], []string{"K_SINK=" + sink.url, heapEnv(prefix + "executor")})...); err != nil {
		return nil, nil, stop, err
	}
	for i := 0; i < 2; i++ {
		name := fmt.Sprintf("notifier-%d", i)
		if procs[name], err = b.startAs("notifier", prefix+name, 0, slices.Concat(gomem["notifier"], []string{"K_SINK=" + sink.url,
			"REDRIVE_SINK=" + redrive.url, "POD_NAME=" + name, "HOSTNAME=" + name, heapEnv(prefix + name)})...); err != nil {
			return nil, nil, stop, err
		}
	}
	return procs, statuses, stop, nil
}

// besideSubmit is a submit on the empty cluster, with a probe namespace of its own.
type besideSubmit struct {
	b    *bench
	c    *submitClient
	ns   string
	stop func()
}

// emptyBeside starts the same stack as the full cluster's on b's (empty) cluster.
func (b *bench) emptyBeside(ctx context.Context) (*besideSubmit, error) {
	procs, statuses, stop, err := b.stackProcs("empty-")
	if err != nil {
		stop()
		return nil, err
	}
	ns, cleanup, err := b.namespace(ctx, "bigprobe")
	if err != nil {
		stop()
		return nil, err
	}
	b.settleWithin(ctx, statuses, bigSettleLimit)
	return &besideSubmit{b: b, c: newSubmitClient(procs["submit"].URL, b.token, 1), ns: ns, stop: func() { cleanup(); stop() }}, nil
}

// admissionBeside times submit's time-to-201 into ns on the big cluster and into the empty
// cluster's, with raw creates on both, in the same rounds (the order rotated each round).
func (b *bench) admissionBeside(ctx context.Context, sec, where string, c *submitClient, ns string, e *besideSubmit) error {
	install, create, err := b.admissionLoops(ctx, c, ns, "full")
	if err != nil {
		return err
	}
	eInstall, eCreate, err := e.b.admissionLoops(ctx, e.c, e.ns, "empty")
	if err != nil {
		return err
	}
	rs := closedLoopRounds(b.o.scaleRuns*b.o.repeats, 1, b.o.repeats, install, eInstall, create, eCreate)
	b.purge(ns)
	e.b.purge(e.ns)
	full, base, raw, baseRaw := rs[0], rs[1], rs[2], rs[3]
	b.compare(sec, "time-to-201 p50 with "+where, msF(full.all.p50), "the same on an empty cluster, same rounds", msF(base.all.p50), "", nil, full.all.note())
	b.compareRepeated(sec, "time-to-201 p99 with "+where, repeatedOf(full, base, p99ms), "ms", "the same on an empty cluster, same rounds", "<= 1.2x", atMost(1.2), "1 client")
	b.compareRepeated(sec, "raw Secret create p99 with "+where, repeatedOf(raw, baseRaw, p99ms), "ms", "the same on the empty cluster, same rounds", "", nil,
		"the API server's share: a ratio here is not submit's")
	return nil
}

// heapEnv asks the process name for a heap profile at its end under BENCH_PPROF_DIR, if
// set (pkg/function's HEAP_PROFILE); else it sets nothing a process reads.
func heapEnv(name string) string {
	d := os.Getenv("BENCH_PPROF_DIR")
	if d == "" {
		return "BENCH_NO_HEAP_PROFILE=1"
	}
	return "HEAP_PROFILE=" + filepath.Join(d, fmt.Sprintf("%s-%d.heap.pprof", name, time.Now().UnixNano()))
}

// bigStartLimit bounds the fresh processes' start-up on the big cluster: long enough to
// measure it, where proc's default bound would end the section.
const bigStartLimit = 10 * time.Minute

// bigSettleLimit bounds the wait for the fresh notifiers' start-up backlog (every record
// written while none ran: 110,000 at full size) to be reported.
const bigSettleLimit = 20 * time.Minute

// startupRows adds each fresh process's start-up (exec to a healthy /healthz, its first
// list of the whole cluster included) beside proc's default bound, and the status events
// the two notifiers sent once started. Only submit's is held to the bound: it scales to
// zero, so a request waits for its start; the others always run (docs/deploy.md).
func (b *bench) startupRows(sec string, procs map[string]*proc.Process, events int64, drained time.Duration) {
	for _, name := range []string{"submit", "executor", "notifier-0", "notifier-1"} {
		started := procs[name].Started
		b.logf("  %s healthy %s after exec", name, started.Round(time.Millisecond))
		var target string
		var check func(v, base float64) bool // none: shown beside the bound, not held to it
		if name == "submit" {
			target, check = "<= 1x", atMost(1)
		}
		b.compare(sec, "start-up of a fresh "+name+" (exec to healthy)", msF(started), "the bench's default start-up bound",
			msF(proc.DefaultStartupLimit), target, check, "")
	}
	b.info(sec, "status events sent by 2 fresh notifiers", figure{float64(events), "events"},
		"of the records written while no notifier ran; docs/deploy.md says which a fresh notifier reports")
	b.info(sec, "the 2 fresh notifiers' start-up backlog reported (last process started to 2 s without an event)", msF(drained),
		fmt.Sprintf("waited at most %s", bigSettleLimit))
}

// writeHelmRecords writes -big-releases releases of -big-revisions revisions across nss
// with Helm's Secrets driver: nine in ten as the helm CLI labels them, one in ten with
// async-helm's labels besides.
func (b *bench) writeHelmRecords(ctx context.Context, nss []string) error {
	manifest := strings.Repeat("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bench\ndata:\n  key: value\n", 40)
	var written atomic.Int64
	return parallel(b.o.bigReleases, 64, func(i int) error {
		ns := nss[i%len(nss)]
		d := storage.NewSecrets(b.cl.Typed.CoreV1().Secrets(ns))
		name := fmt.Sprintf("r%d", i)
		for v := 1; v <= b.o.bigRevisions; v++ {
			status := helmrelease.StatusSuperseded
			if v == b.o.bigRevisions {
				status = helmrelease.StatusDeployed
			}
			now := helmtime.Now()
			rel := &helmrelease.Release{Name: name, Namespace: ns, Version: v, Manifest: manifest, Config: map[string]any{"message": "bench"},
				Info: &helmrelease.Info{FirstDeployed: now, LastDeployed: now, Status: status, Description: "Upgrade complete"}}
			if i%10 == 0 {
				rel.Labels = release.Labels(fmt.Sprintf("req-%d-%d", i, v), v, "tiny", "0.1.0")
			}
			if err := d.Create(release.SecretName(name, v), rel); err != nil {
				return fmt.Errorf("write %s/%s v%d: %w", ns, name, v, err)
			}
			if n := written.Add(1); n%10000 == 0 {
				b.logf("  %d release Secrets written", n)
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
		return nil
	})
}

// peakRSS adds each process's peak RSS against 0.8x its memory limit in config/knative.
func (b *bench) peakRSS(sec string, procs map[string]*proc.Process, where string) error {
	for _, name := range []string{"submit", "executor", "notifier-0", "notifier-1"} {
		fn, _, _ := strings.Cut(name, "-")
		limit, err := knativeMemoryLimit(fn)
		if err != nil {
			return err
		}
		rss, hwm := procMem(procs[name].Pid())
		b.compare(sec, fmt.Sprintf("peak RSS of %s with %s", name, where), mibF(hwm), fmt.Sprintf("0.8x its limit of %d MiB", limit>>20),
			mibF(limit*8/10), "<= 1x", atMost(1), fmt.Sprintf("now %d MiB; NAMESPACES unset, GOMEMLIMIT as config/knative sets it", rss>>20))
	}
	return nil
}

var goGCEnv = regexp.MustCompile(`name:\s*(GOMEMLIMIT|GOGC),\s*value:\s*"?([0-9A-Za-z]+)`)

// knativeGCEnv is fn's GOMEMLIMIT (required) and GOGC (if set) in config/knative, as
// NAME=value: the processes are measured with the GC settings of their containers.
func knativeGCEnv(fn string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join("config", "knative", "5*-"+fn+".yaml"))
	if err != nil || len(files) != 1 {
		return nil, fmt.Errorf("config/knative has no single manifest of %s (%v)", fn, err)
	}
	text, err := os.ReadFile(files[0])
	if err != nil {
		return nil, err
	}
	var env []string
	for _, m := range goGCEnv.FindAllSubmatch(text, -1) {
		env = append(env, string(m[1])+"="+string(m[2]))
	}
	if !strings.Contains(strings.Join(env, " "), "GOMEMLIMIT=") {
		return nil, fmt.Errorf("%s: no GOMEMLIMIT", files[0])
	}
	return env, nil
}

var memoryLimit = regexp.MustCompile(`limits:\s*\{[^}]*memory:\s*(\d+)(Mi|Gi)`)

// knativeMemoryLimit reads fn's memory limit from config/knative's manifest of it.
func knativeMemoryLimit(fn string) (int64, error) {
	files, err := filepath.Glob(filepath.Join("config", "knative", "5*-"+fn+".yaml"))
	if err != nil || len(files) != 1 {
		return 0, fmt.Errorf("config/knative has no single manifest of %s (%v)", fn, err)
	}
	text, err := os.ReadFile(files[0])
	if err != nil {
		return 0, err
	}
	m := memoryLimit.FindSubmatch(text)
	if m == nil {
		return 0, fmt.Errorf("%s: no memory limit", files[0])
	}
	v, _ := strconv.ParseInt(string(m[1]), 10, 64)
	if string(m[2]) == "Gi" {
		return v << 30, nil
	}
	return v << 20, nil
}
