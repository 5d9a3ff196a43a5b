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
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/async-helm/async-helm/internal/chartrepo"
	"github.com/async-helm/async-helm/internal/eventing"
	"github.com/async-helm/async-helm/internal/operator"
	"github.com/async-helm/async-helm/internal/proc"
	"github.com/async-helm/async-helm/pkg/kube"
	"github.com/async-helm/async-helm/pkg/release"
)

// bench holds what every section shares.
type bench struct {
	o      options
	cl     *kube.Clients
	charts *chartrepo.Repo
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
}

func newBench(ctx context.Context, o options) (*bench, error) {
	kubeconfig := os.Getenv("KUBECONFIG")
	if kubeconfig == "" {
		return nil, fmt.Errorf("KUBECONFIG is not set (make bench sets it to the local cluster's)")
	}
	cl, err := kube.Open(kubeconfig)
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
	if b.charts, err = chartrepo.Start(o.charts, dir, ln); err != nil {
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
	return b, nil
}

func (b *bench) close() {
	for i := len(b.closers) - 1; i >= 0; i-- {
		b.closers[i]()
	}
}

func (b *bench) logf(format string, args ...interface{}) {
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
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := b.cl.Typed.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return "", nil, fmt.Errorf("namespace %s has no default ServiceAccount: %w", name, err)
	}
	return name, func() {
		b.purge(name)
		_ = nss.Delete(context.Background(), name, metav1.DeleteOptions{})
	}, nil
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
}

// start runs a function as make run and the end-to-end tests do (internal/proc), with
// warnings-only logs under .cache/bench/logs and the run's signing key.
func (b *bench) start(fn string, port int, env ...string) (*proc.Process, error) {
	log := filepath.Join(b.logDir, fn+".log")
	base := []string{"KUBECONFIG=" + b.kubeconfig, "LOG_LEVEL=warn", "EVENT_SIGNING_KEY=" + b.key, "ALLOW_LOOPBACK_CHARTS=true"}
	if d := os.Getenv("BENCH_PPROF_DIR"); d != "" {
		// pkg/function writes a CPU profile of the whole process life there on exit.
		base = append(base, "CPU_PROFILE="+filepath.Join(d, fmt.Sprintf("%s-%d.pprof", fn, time.Now().UnixNano())))
	}
	p, err := proc.Start(filepath.Join(b.o.bin, fn), port, log, append(base, env...)...)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", fn, err)
	}
	return p, nil
}

// submitProc starts submit with its events going to sink and no admission bound (the
// submit section keeps thousands of reservations pending: nothing executes them).
func (b *bench) submitProc(sink string, env ...string) (*proc.Process, error) {
	return b.start("submit", 0, append([]string{"K_SINK=" + sink, "MAX_QUEUED=10000000", "MAX_QUEUED_PER_NAMESPACE=10000000"}, env...)...)
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

// knativeStack is make run's stack in ns (see hack/devstack, internal/chaos): config/knative's
// Broker and Triggers on the local Knative Eventing, the executor with `slots` slots, the
// notifier and submit, each a local process.
func (b *bench) knativeStack(ctx context.Context, ns string, slots int, statusSink string) (submit *proc.Process, stop func(), err error) {
	root, err := os.Getwd()
	if err != nil {
		return nil, nil, err
	}
	local, err := eventing.Open(eventing.Dir(root), b.kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	ports, err := eventing.FreeFunctions()
	if err != nil {
		return nil, nil, err
	}
	t0 := time.Now()
	w, err := local.Wire(ctx, b.cl.Config, eventing.Options{Namespace: ns, ConfigDir: filepath.Join(root, "config", "knative"),
		Addresses: ports.Addresses(), EventLog: statusSink, Timeout: 2 * time.Minute})
	if err != nil {
		return nil, nil, fmt.Errorf("wire %s through Knative: %w", ns, err)
	}
	b.logf("  Broker and %d Triggers Ready in %.1fs", len(w.Triggers), time.Since(t0).Seconds())
	var procs []*proc.Process
	stop = func() {
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i].Stop()
		}
	}
	for _, p := range []struct {
		name string
		port int
		env  []string
	}{
		{"executor", ports.Executor, []string{fmt.Sprintf("MAX_PARALLEL=%d", slots)}},
		{"notifier", ports.Notifier, []string{"K_SINK=" + w.BrokerURL, "NAMESPACES=" + ns}},
		// No admission bound: pending work of other runs in the cluster counts against it.
		{"submit", ports.Submit, []string{"K_SINK=" + w.BrokerURL, "MAX_QUEUED=10000000", "MAX_QUEUED_PER_NAMESPACE=10000000"}},
	} {
		pr, err := b.start(p.name, p.port, p.env...)
		if err != nil {
			stop()
			return nil, nil, err
		}
		procs = append(procs, pr)
	}
	return procs[len(procs)-1], stop, nil
}
