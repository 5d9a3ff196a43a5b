package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/async-helm/async-helm/internal/eventing"
	"github.com/async-helm/async-helm/internal/localstack"
	"github.com/async-helm/async-helm/internal/operator"
	"github.com/async-helm/async-helm/internal/proc"
	"github.com/async-helm/async-helm/internal/testchartrepo"
	"github.com/async-helm/async-helm/internal/testcluster"
	"github.com/async-helm/async-helm/pkg/kube"
	"github.com/async-helm/async-helm/pkg/ledger"
	"github.com/async-helm/async-helm/pkg/release"
)

// bench holds what every section shares.
type bench struct {
	o      options
	cl     *kube.Clients
	charts *testchartrepo.Repo
	rows   []row
	// key signs events as submit does; token calls submit (which refuses system:masters)
	// as a ServiceAccount bound to cluster-admin.
	key         string
	token       string
	kubeconfig  string
	logDir      string
	loadAtStart string
	closers     []func()
	// gitlabCold are the cold time-to-201 samples of GitLab (submit section), which the
	// console section compares with Helm's time-to-pending.
	gitlabCold []sample
	// startLimit bounds each start's wait for a healthy /healthz (proc's default when 0).
	startLimit time.Duration
}

func newBench(ctx context.Context, o options) (*bench, error) {
	kubeconfig := os.Getenv("KUBECONFIG")
	if kubeconfig == "" {
		return nil, fmt.Errorf("KUBECONFIG is not set (make bench sets it to the local cluster's)")
	}
	// Unlimited as submit's own client: with client-go's 500/s bucket the raw creates that
	// are the floor were throttled on the bench's side (2,000 creates in no less than 2 s).
	cl, err := kube.Open(kubeconfig, kube.Unlimited)
	if err != nil {
		return nil, err
	}
	b := &bench{o: o, cl: cl, kubeconfig: kubeconfig, loadAtStart: loadAvg()}
	b.logDir = filepath.Join(o.out, "logs")
	if err := os.MkdirAll(b.logDir, 0o755); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "bench-charts")
	if err != nil {
		return nil, err
	}
	b.closers = append(b.closers, func() { _ = os.RemoveAll(dir) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	if b.charts, err = testchartrepo.Start(o.charts, dir, ln); err != nil {
		return nil, err
	}
	b.closers = append(b.closers, func() { _ = b.charts.Close() })
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	b.key = hex.EncodeToString(k)
	if b.token, err = operator.Token(ctx, cl.Typed, 6*time.Hour); err != nil {
		return nil, err
	}
	return b, b.ownNamespace(ctx)
}

// ownNamespace makes sure async-helm's own namespace exists (ASYNC_HELM_NAMESPACE's
// default): submit binds each accepted request there and the executor consumes it there,
// and make run deletes it when it stops.
func (b *bench) ownNamespace(ctx context.Context) error {
	_, err := b.cl.Typed.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testcluster.OwnNamespace}},
		metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: %w", testcluster.OwnNamespace, err)
	}
	return nil
}

func (b *bench) close() {
	for i := len(b.closers) - 1; i >= 0; i-- {
		b.closers[i]()
	}
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05 ")+format+"\n", args...)
}

// namespace creates a namespace for one part of a section; the returned func deletes it.
func (b *bench) namespace(ctx context.Context, prefix string) (string, func(), error) {
	name := fmt.Sprintf("bench-%s-%d", prefix, time.Now().UnixNano()%1e8)
	nss := b.cl.Typed.CoreV1().Namespaces()
	if _, err := nss.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		return "", nil, fmt.Errorf("create namespace %s: %w", name, err)
	}
	// Pods of charts need the default ServiceAccount, which the controller-manager adds.
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := b.cl.Typed.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		_ = nss.Delete(context.Background(), name, metav1.DeleteOptions{})
		return "", nil, fmt.Errorf("namespace %s has no default ServiceAccount: %w", name, err)
	}
	return name, func() {
		b.purge(name)
		_ = nss.Delete(context.Background(), name, metav1.DeleteOptions{})
	}, nil
}

// awaitNamespacesDeleted waits, within a bound, until no namespace is being deleted: the controller-manager
// deletes an earlier section's thousands of Secrets one by one, and those deletes compete
// with whatever is measured next (raw creates at 400/s had p99 1.3-4.5 s beside them, tens
// of milliseconds without). A section measured before the cluster settled says so.
func (b *bench) awaitNamespacesDeleted(ctx context.Context) {
	t0 := time.Now()
	terminating := 0
	err := wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := b.cl.Typed.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil // the API server is busy; ask again
		}
		terminating = 0
		for _, ns := range list.Items {
			if ns.Status.Phase == corev1.NamespaceTerminating {
				terminating++
			}
		}
		return terminating == 0, nil
	})
	switch {
	case err != nil:
		b.logf("  cluster not settled after %s: %d namespaces still being deleted", time.Since(t0).Round(time.Second), terminating)
	case time.Since(t0) > time.Second:
		b.logf("  waited %s for earlier namespaces to be deleted", time.Since(t0).Round(time.Second))
	}
}

// purge deletes the queued reservations of ns at once: every submit in the cluster counts
// pending reservations against its admission bound (MAX_QUEUED), so thousands left to the
// namespace's slow deletion would refuse other people's installs meanwhile.
func (b *bench) purge(ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	queued := release.SelectorPending + "," + release.LabelQueued + "=true"
	err := b.cl.Typed.CoreV1().Secrets(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: queued})
	if err != nil {
		b.logf("  purge release records of %s: %v (the namespace's deletion removes them)", ns, err)
	}
	b.forgetLedger(ctx, ns)
}

// forgetLedger deletes the ledger entries (Leases in async-helm's own namespace) of the
// requests accepted in ns: no executor consumes a bench's requests, and every submit of the
// shared cluster counts each entry against MAX_QUEUED until its TTL (70 min) and a running
// submit deletes it. One cpu section left 6,000, which refused everyone's installs (429).
func (b *bench) forgetLedger(ctx context.Context, ns string) {
	leases := b.cl.Typed.CoordinationV1().Leases(testcluster.OwnNamespace)
	list, err := leases.List(ctx, metav1.ListOptions{LabelSelector: ledger.Label + "=true"})
	if err != nil {
		b.logf("  ledger entries of %s not deleted: %v", ns, err)
		return
	}
	names := make(chan string)
	var deleted atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range names {
				if err := leases.Delete(ctx, name, metav1.DeleteOptions{}); err == nil || apierrors.IsNotFound(err) {
					deleted.Add(1)
				}
			}
		}()
	}
	for _, l := range list.Items {
		if onlyOf(&l, ns) {
			names <- l.Name
		}
	}
	close(names)
	wg.Wait()
	if n := deleted.Load(); n > 0 {
		b.logf("  deleted %d ledger Leases of %s (an entry each, or a group commit's batch)", n, ns)
	}
}

// onlyOf says whether every entry ledger Lease l holds (one, or a group commit's batch) is
// of a request accepted in ns.
func onlyOf(l *coordinationv1.Lease, ns string) bool {
	es, ok := ledger.EntriesOf(l)
	if !ok || len(es) == 0 {
		return false
	}
	for _, e := range es {
		if e.Namespace != ns {
			return false
		}
	}
	return true
}

// start runs a function as make run and the end-to-end tests do (internal/proc), with
// warnings-only logs under .cache/bench/logs and the run's signing key.
func (b *bench) start(fn string, port int, env ...string) (*proc.Process, error) {
	return b.startAs(fn, fn, port, env...)
}

// startAs is start for one of several instances of fn: name names its log and profile.
func (b *bench) startAs(fn, name string, port int, env ...string) (*proc.Process, error) {
	log := filepath.Join(b.logDir, name+".log")
	env = append(append(b.baseEnv(), b.profileEnv(name)...), env...)
	p, err := proc.StartWithin(b.startLimit, filepath.Join(b.o.bin, fn), port, log, env...)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", fn, err)
	}
	return p, nil
}

// baseEnv is what every function the bench starts gets.
func (b *bench) baseEnv() []string {
	return []string{"KUBECONFIG=" + b.kubeconfig, "LOG_LEVEL=warn", "EVENT_SIGNING_KEY=" + b.key, "ALLOW_LOOPBACK_CHARTS=true"}
}

// profileEnv asks the process name for a CPU profile under BENCH_PPROF_DIR, if set.
func (b *bench) profileEnv(name string) []string {
	d := os.Getenv("BENCH_PPROF_DIR")
	if d == "" {
		return nil
	}
	// pkg/function writes a CPU profile of the whole process life there on exit.
	return []string{"CPU_PROFILE=" + filepath.Join(d, fmt.Sprintf("%s-%d.pprof", name, time.Now().UnixNano()))}
}

// submitProc starts submit with its events going to sink and no admission bound (the
// submit section keeps thousands of reservations pending: nothing executes them).
func (b *bench) submitProc(sink string, env ...string) (*proc.Process, error) {
	return b.start("submit", 0, append(submitEnv(sink), env...)...)
}

// submitEnv is what submitProc sets.
func submitEnv(sink string) []string {
	return []string{"K_SINK=" + sink, "MAX_QUEUED=10000000", "MAX_QUEUED_PER_NAMESPACE=10000000", "MAX_RETAINED=0"}
}

// submitWithSink starts submit (submitProc) with its events going to a new sink that
// calls keep; stop stops both. The sink's URL is returned for other functions to share.
func (b *bench) submitWithSink(keep func(r *http.Request, body []byte)) (*proc.Process, string, func(), error) {
	s, err := newSink(keep)
	if err != nil {
		return nil, "", nil, err
	}
	p, err := b.submitProc(s.url)
	if err != nil {
		s.close()
		return nil, "", nil, err
	}
	return p, s.url, func() { p.Stop(); s.close() }, nil
}

// sink acknowledges every event at once, as a Broker's ingress does, and keeps the bodies
// and headers it was asked to keep.
type sink struct {
	url  string
	srv  *http.Server
	mu   sync.Mutex
	keep func(r *http.Request, body []byte)
}

func newSink(keep func(r *http.Request, body []byte)) (*sink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &sink{url: "http://" + ln.Addr().String(), keep: keep}
	s.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if s.keep != nil {
			s.keep(r, body)
		}
		w.WriteHeader(http.StatusAccepted)
	})}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *sink) close() { _ = s.srv.Close() }

// stackOptions shape make run's stack for a section.
type stackOptions struct {
	// slots is each executor's MAX_PARALLEL; 0 keeps the executor's default.
	slots int
	// executors run behind the executor's load balancer (internal/loadbalance), as a
	// Knative Service spreads deliveries over its pods; 0 means one.
	executors int
	// engine is the executors' HELM_ENGINE ("": the default, v3).
	engine string
}

// stackIn creates a namespace (prefix) and starts make run's stack in it, the Broker's
// status events going to a sink that acknowledges them; done stops the stack, closes the
// sink and deletes the namespace.
func (b *bench) stackIn(ctx context.Context, prefix string, o stackOptions) (string, *localstack.Stack, func(), error) {
	ns, cleanup, err := b.namespace(ctx, prefix)
	if err != nil {
		return "", nil, nil, err
	}
	status, err := newSink(nil)
	if err != nil {
		cleanup()
		return "", nil, nil, err
	}
	st, err := b.knativeStack(ctx, ns, status.url, o)
	if err != nil {
		status.close()
		cleanup()
		return "", nil, nil, err
	}
	return ns, st, func() { st.Stop(); status.close(); cleanup() }, nil
}

// knativeStack is make run's stack in ns (internal/localstack, as make run, chaos and the
// end-to-end tests start it): config/knative's Broker and Triggers on the local Knative
// Eventing, the executors, the notifier and submit as local processes, each function
// behind the load balancer that stands for its Knative Service.
func (b *bench) knativeStack(ctx context.Context, ns, statusSink string, o stackOptions) (*localstack.Stack, error) {
	root, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	local, err := eventing.Open(eventing.Dir(root), b.kubeconfig)
	if err != nil {
		return nil, err
	}
	fenv := map[string][]string{
		localstack.Notifier: {"NAMESPACES=" + ns},
		// No admission bound: pending work of other runs in the cluster counts against it.
		localstack.Submit: {"MAX_QUEUED=10000000", "MAX_QUEUED_PER_NAMESPACE=10000000", "MAX_RETAINED=0"},
	}
	if o.slots > 0 {
		fenv[localstack.Executor] = []string{fmt.Sprintf("MAX_PARALLEL=%d", o.slots)}
	}
	if o.engine != "" {
		fenv[localstack.Executor] = append(fenv[localstack.Executor], "HELM_ENGINE="+o.engine)
	}
	t0 := time.Now()
	st, err := localstack.Start(ctx, localstack.Config{Knative: local, Rest: b.cl.Config, Namespace: ns,
		ConfigDir: filepath.Join(root, "config", "knative"), EventLog: statusSink, WireTimeout: 2 * time.Minute,
		Bins: localstack.Bins(b.o.bin), Counts: localstack.Counts{Executor: o.executors}, LogDir: b.logDir,
		Env: b.baseEnv(), FunctionEnv: fenv,
		InstanceEnv: func(fn string, i int) []string { return b.profileEnv(localstack.InstanceName(fn, i)) }})
	if err != nil {
		return nil, err
	}
	b.logf("  stack up (Broker, %d Triggers, %d executor(s)) in %.1fs", len(st.Wiring.Triggers), len(st.Executor.Instances), time.Since(t0).Seconds())
	return st, nil
}
