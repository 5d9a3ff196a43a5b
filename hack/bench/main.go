// Command bench is `make bench`: it measures async-helm against the local cluster and
// prints one table, each figure beside its target. Figures are percentiles and ratios from
// one run: machines are noisy, so read them as such.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/async-helm/async-helm/internal/chartrepo"
	"github.com/async-helm/async-helm/internal/operator"
	"github.com/async-helm/async-helm/internal/proc"
	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/chartsource"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/kube"
	"github.com/async-helm/async-helm/pkg/release"
)

type options struct {
	bin, helm, charts     string
	clients, installs     int
	gitlabInstalls        int
	helmRuns              int
	releases, payloadKiB  int
	latencySamples        int
	startupRuns           int
	skipNotifier, skipCLI bool
}

type row struct{ figure, measured, target, verdict string }

type bench struct {
	o      options
	cl     *kube.Clients
	charts *chartrepo.Repo
	rows   []row
	// key signs events as submit does; token calls submit (which refuses system:masters)
	// as a ServiceAccount bound to cluster-admin.
	key   []byte
	token string
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "bin", "built functions")
	flag.StringVar(&o.helm, "helm", ".cache/localcluster/bin/helm", "helm CLI built from the same helm.sh/helm/v3")
	flag.StringVar(&o.charts, "charts", "testdata/charts", "charts")
	flag.IntVar(&o.clients, "clients", 50, "concurrent clients for time-to-201")
	flag.IntVar(&o.installs, "installs", 1000, "installs of the tiny chart")
	flag.IntVar(&o.gitlabInstalls, "gitlab-installs", 300, "installs of the GitLab chart")
	flag.IntVar(&o.helmRuns, "helm-runs", 5, "runs of executor vs helm CLI")
	flag.IntVar(&o.releases, "releases", 5000, "release secrets the notifier watches")
	flag.IntVar(&o.payloadKiB, "payload-kib", 100, "payload of each of those secrets")
	flag.IntVar(&o.latencySamples, "latency-samples", 200, "status changes timed through the notifier")
	flag.IntVar(&o.startupRuns, "startup-runs", 5, "start-ups timed per function")
	flag.BoolVar(&o.skipNotifier, "skip-notifier", false, "skip the 5,000-release notifier figures")
	flag.BoolVar(&o.skipCLI, "skip-helm-cli", false, "skip executor vs helm CLI")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	cl, err := kube.Open(os.Getenv("KUBECONFIG"))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "bench-charts")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	charts, err := chartrepo.Start(o.charts, dir, ln)
	if err != nil {
		return err
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	token, err := operator.Token(context.Background(), cl.Typed, 6*time.Hour)
	if err != nil {
		return err
	}
	b := &bench{o: o, cl: cl, charts: charts, key: []byte(hex.EncodeToString(key)), token: token}
	steps := []func() error{b.submit, b.startup}
	if !o.skipCLI {
		steps = append(steps, b.executorVsHelm)
	}
	if !o.skipNotifier {
		steps = append(steps, b.notifier)
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return err
		}
	}
	b.print()
	return nil
}

func (b *bench) add(figure, measured, target string, ok bool) {
	v := "ok"
	if !ok {
		v = "MISSED"
	}
	b.rows = append(b.rows, row{figure, measured, target, v})
	fmt.Fprintf(os.Stderr, "  %s: %s (target %s) %s\n", figure, measured, target, v)
}

func (b *bench) print() {
	fmt.Printf("\n| figure | measured | target | |\n|---|---|---|---|\n")
	for _, r := range b.rows {
		fmt.Printf("| %s | %s | %s | %s |\n", r.figure, r.measured, r.target, r.verdict)
	}
}

func (b *bench) namespace(prefix string) (string, func(), error) {
	name := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1e9)
	ctx := context.Background()
	_, err := b.cl.Typed.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		return "", nil, err
	}
	for i := 0; i < 200; i++ {
		if _, err := b.cl.Typed.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return name, func() {
		_ = b.cl.Typed.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	}, nil
}

// start runs a function with warnings-only logs in a temporary file.
func (b *bench) start(bin string, env ...string) (*proc.Process, time.Duration, error) {
	f, err := os.CreateTemp("", filepath.Base(bin)+"-*.log")
	if err != nil {
		return nil, 0, err
	}
	f.Close()
	p, err := proc.Start(bin, 0, f.Name(), append([]string{"LOG_LEVEL=warn", "EVENT_SIGNING_KEY=" + string(b.key)}, env...)...)
	if err != nil {
		return nil, 0, err
	}
	return p, p.Started, nil
}

// ackSink acknowledges every event at once, as a Broker's ingress does.
func ackSink() (string, func(), *atomic.Int64, error) {
	var n atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, nil, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.WriteHeader(http.StatusAccepted)
	})}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { _ = srv.Close() }, &n, nil
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(float64(len(s)-1) * p)
	return s[i]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

// submit: time-to-201 and accepted installs/s with concurrent clients, tiny and GitLab.
func (b *bench) submit() error {
	fmt.Fprintln(os.Stderr, "submit: time-to-201")
	sink, stopSink, _, err := ackSink()
	if err != nil {
		return err
	}
	defer stopSink()
	p, _, err := b.start(filepath.Join(b.o.bin, "submit"), "KUBECONFIG="+os.Getenv("KUBECONFIG"), "K_SINK="+sink, "ALLOW_LOOPBACK_CHARTS=true")
	if err != nil {
		return err
	}
	defer p.Kill()
	ns, cleanup, err := b.namespace("bench-submit")
	if err != nil {
		return err
	}
	defer cleanup()
	gitlabValues, err := chartutil.ReadValuesFile(filepath.Join(b.o.charts, "gitlab-values-offline.yaml"))
	if err != nil {
		return err
	}
	tiny, err := b.load(p.URL, ns, "tiny", b.charts.ChartURL("tiny", "0.1.0"), map[string]interface{}{"message": "bench"}, b.o.installs)
	if err != nil {
		return err
	}
	gitlab, err := b.load(p.URL, ns, "gitlab", b.charts.ChartURL("gitlab", "6.5.4"), gitlabValues, b.o.gitlabInstalls)
	if err != nil {
		return err
	}
	b.add(fmt.Sprintf("submit time-to-201 p50, tiny chart, %d clients", b.o.clients), ms(tiny.p50), "", true)
	b.add(fmt.Sprintf("submit time-to-201 p99, tiny chart, %d clients", b.o.clients), ms(tiny.p99), "<= 50 ms", tiny.p99 <= 50*time.Millisecond)
	b.add("submit accepted installs/s, tiny chart", fmt.Sprintf("%.0f /s (%d of %d accepted)", tiny.rate, tiny.ok, b.o.installs), ">= 200 /s", tiny.rate >= 200 && tiny.ok == b.o.installs)
	b.add("submit time-to-201 p50 / p99, GitLab chart", ms(gitlab.p50)+" / "+ms(gitlab.p99), "", gitlab.ok == b.o.gitlabInstalls)
	ratio := float64(gitlab.p50) / float64(tiny.p50)
	b.add("time-to-201 GitLab / tiny (p50)", fmt.Sprintf("%.2fx", ratio), "<= 2x", ratio <= 2)
	return nil
}

type loadResult struct {
	p50, p99 time.Duration
	rate     float64
	ok       int
}

// load sends n installs from b.o.clients clients (after one warm-up that fills the chart cache).
func (b *bench) load(url, ns, prefix, chartURL string, values map[string]interface{}, n int) (loadResult, error) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: b.o.clients}, Timeout: 30 * time.Second}
	post := func(name string) (time.Duration, int, error) {
		body, _ := json.Marshal(api.ReleaseRequest{Name: name, Namespace: ns, ChartURL: chartURL, Values: values})
		t0 := time.Now()
		req, err := http.NewRequest(http.MethodPost, url+api.PathAsync, bytes.NewReader(body))
		if err != nil {
			return 0, 0, err
		}
		req.Header.Set("Authorization", "Bearer "+b.token)
		resp, err := client.Do(req)
		if err != nil {
			return 0, 0, err
		}
		var e api.Error
		if resp.StatusCode != http.StatusCreated {
			_ = json.NewDecoder(resp.Body).Decode(&e)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			return 0, resp.StatusCode, fmt.Errorf("%d %s", resp.StatusCode, e.Error)
		}
		return time.Since(t0), resp.StatusCode, nil
	}
	if _, _, err := post(prefix + "-warm"); err != nil {
		return loadResult{}, fmt.Errorf("warm-up: %w", err)
	}
	lat := make([]time.Duration, n)
	var ok atomic.Int64
	var firstErr atomic.Value
	t0 := time.Now()
	parallel(n, b.o.clients, func(i int) bool {
		d, _, err := post(fmt.Sprintf("%s-%d", prefix, i))
		if err != nil {
			firstErr.CompareAndSwap(nil, err)
			return true
		}
		lat[i] = d
		ok.Add(1)
		return true
	})
	took := time.Since(t0)
	if err, _ := firstErr.Load().(error); err != nil {
		fmt.Fprintln(os.Stderr, "  first refused request:", err)
	}
	var got []time.Duration
	for _, d := range lat {
		if d > 0 {
			got = append(got, d)
		}
	}
	return loadResult{p50: percentile(got, 0.5), p99: percentile(got, 0.99), rate: float64(ok.Load()) / took.Seconds(), ok: int(ok.Load())}, nil
}

// startup: exec to /healthz 200 for each function (a Knative cold start).
func (b *bench) startup() error {
	fmt.Fprintln(os.Stderr, "start-up of each function")
	for _, fn := range []string{"submit", "executor", "notifier"} {
		var ds []time.Duration
		for i := 0; i < b.o.startupRuns; i++ {
			p, d, err := b.start(filepath.Join(b.o.bin, fn), "KUBECONFIG="+os.Getenv("KUBECONFIG"), "K_SINK=http://127.0.0.1:9", "NAMESPACES=default")
			if err != nil {
				return err
			}
			p.Kill()
			ds = append(ds, d)
		}
		med := percentile(ds, 0.5)
		b.add(fn+" start-up, exec to ready (median of "+strconv.Itoa(b.o.startupRuns)+")", ms(med), "<= 200 ms", med <= 200*time.Millisecond)
	}
	return nil
}

// executorVsHelm: the executor's event-to-deployed against `helm install --wait` on the same chart.
func (b *bench) executorVsHelm() error {
	fmt.Fprintln(os.Stderr, "executor vs helm install")
	p, _, err := b.start(filepath.Join(b.o.bin, "executor"), "KUBECONFIG="+os.Getenv("KUBECONFIG"), "ALLOW_LOOPBACK_CHARTS=true")
	if err != nil {
		return err
	}
	defer p.Kill()
	store := &release.Store{Client: b.cl.Typed, Metadata: b.cl.Metadata}
	ce, err := cloudevents.NewClientHTTP()
	if err != nil {
		return err
	}
	chartURL := b.charts.ChartURL("tiny", "0.1.0")
	before := b.charts.Downloads.Load()
	var exe, cli []time.Duration
	for i := 0; i < b.o.helmRuns; i++ {
		ns, cleanup, err := b.namespace("bench-exec")
		if err != nil {
			return err
		}
		ctx := context.Background()
		chrt := b.charts.Dir + "/tiny-0.1.0.tgz"
		// helm CLI
		t0 := time.Now()
		out, err := exec.Command(b.o.helm, "install", "cli", chrt, "-n", ns, "--wait", "--wait-for-jobs", "--timeout", "2m").CombinedOutput()
		if err != nil {
			cleanup()
			return fmt.Errorf("helm install: %v: %s", err, out)
		}
		cli = append(cli, time.Since(t0))
		// executor: reserve as submit does, then time the event to deployed
		sec, err := store.Reserve(ctx, release.Reservation{Namespace: ns, Name: "exe", Action: release.ActionInstall,
			Chart: &chart.Metadata{Name: "tiny", Version: "0.1.0"}, RequestID: fmt.Sprintf("bench-%d", i), Revision: 1})
		if err != nil {
			cleanup()
			return err
		}
		e, _ := events.NewAccepted(events.Action{Action: release.ActionInstall, Namespace: ns, Name: "exe", Revision: 1,
			SecretName: sec.Name, Chart: chartsource.Ref{URL: chartURL}, RequestID: fmt.Sprintf("bench-%d", i),
			Options: events.Options{Timeout: 2 * time.Minute, Wait: true, WaitForJobs: true}})
		events.Sign(&e, b.key, time.Now())
		t0 = time.Now()
		res := ce.Send(cloudevents.ContextWithTarget(ctx, p.URL), e)
		d := time.Since(t0)
		rel, err := store.Get(ctx, ns, "exe", 1)
		cleanup()
		if !cloudevents.IsACK(res) || err != nil || rel.Info.Status.String() != "deployed" {
			return fmt.Errorf("executor run %d: %v %v", i, res, err)
		}
		exe = append(exe, d)
	}
	ratio := float64(percentile(exe, 0.5)) / float64(percentile(cli, 0.5))
	b.add(fmt.Sprintf("executor event-to-deployed / helm install --wait (median of %d, tiny chart)", b.o.helmRuns),
		fmt.Sprintf("%.2fx (%s vs %s)", ratio, ms(percentile(exe, 0.5)), ms(percentile(cli, 0.5))), "<= 1.1x", ratio <= 1.1)
	dl := b.charts.Downloads.Load() - before
	b.add(fmt.Sprintf("executor chart downloads for %d installs of one chart", b.o.helmRuns), strconv.FormatInt(dl, 10), "1 (cache hit on repeat)", dl == 1)
	return nil
}

// notifier: RSS while watching many large release secrets, and status-change-to-event latency.
func (b *bench) notifier() error {
	fmt.Fprintf(os.Stderr, "notifier: creating %d release secrets of %d KiB\n", b.o.releases, b.o.payloadKiB)
	ns, cleanup, err := b.namespace("bench-notifier")
	if err != nil {
		return err
	}
	defer cleanup()
	payload := make([]byte, b.o.payloadKiB<<10)
	_, _ = rand.Read(payload)
	if err := createSecrets(b.cl.Typed, ns, b.o.releases, payload); err != nil {
		return err
	}
	sink := newTimingSink()
	defer sink.close()
	p, _, err := b.start(filepath.Join(b.o.bin, "notifier"), "KUBECONFIG="+os.Getenv("KUBECONFIG"), "K_SINK="+sink.url, "NAMESPACES="+ns, "SWEEP_INTERVAL=1h")
	if err != nil {
		return err
	}
	defer p.Kill()
	time.Sleep(2 * time.Second) // settle after the initial list
	rss, hwm := procMem(p.Pid())
	total := int64(b.o.releases) * int64(len(payload))
	b.add(fmt.Sprintf("notifier RSS watching %d releases of %d KiB", b.o.releases, b.o.payloadKiB),
		fmt.Sprintf("%d MiB (peak %d MiB; payloads not held: %d MiB)", rss>>20, hwm>>20, total>>20), "<= 64 MiB", hwm <= 64<<20)

	ctx := context.Background()
	var lat []time.Duration
	for i := 0; i < b.o.latencySamples; i++ {
		name := fmt.Sprintf("r%d", i)
		id := events.StatusEventID(ns, name, 1, "superseded", "") // raw secrets: no request id
		t0 := time.Now()
		patch := `{"metadata":{"labels":{"status":"superseded"}}}`
		if _, err := b.cl.Typed.CoreV1().Secrets(ns).Patch(ctx, release.SecretName(name, 1), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return err
		}
		at, ok := sink.wait(id, 10*time.Second)
		if !ok {
			return fmt.Errorf("no event %s within 10s", id)
		}
		lat = append(lat, at.Sub(t0))
	}
	p99 := percentile(lat, 0.99)
	b.add(fmt.Sprintf("notifier status change to event received, p50 / p99 (%d changes)", len(lat)),
		ms(percentile(lat, 0.5))+" / "+ms(p99), "p99 <= 200 ms", p99 <= 200*time.Millisecond)
	return nil
}

func createSecrets(cs kubernetes.Interface, ns string, n int, payload []byte) error {
	var firstErr atomic.Value
	parallel(n, 16, func(i int) bool {
		name := fmt.Sprintf("r%d", i)
		_, err := cs.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: release.SecretName(name, 1),
				Labels: map[string]string{"owner": "helm", "name": name, "status": "deployed", "version": "1",
					release.LabelChart: "tiny-0.1.0"},
				Annotations: map[string]string{release.AnnotationNotified: "deployed"}},
			Type: release.SecretType, Data: map[string][]byte{"release": payload},
		}, metav1.CreateOptions{})
		if err != nil {
			firstErr.CompareAndSwap(nil, err)
			return false
		}
		return true
	})
	if err, _ := firstErr.Load().(error); err != nil {
		return fmt.Errorf("create release secrets: %w", err)
	}
	return nil
}

// parallel runs fn(0..n-1) on workers goroutines; a worker stops when fn returns false.
func parallel(n, workers int, fn func(i int) bool) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || !fn(i) {
					return
				}
			}
		}()
	}
	wg.Wait()
}

// procMem reads VmRSS and VmHWM (peak) of a process, in bytes.
func procMem(pid int) (rss, hwm int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			switch f[0] {
			case "VmRSS:":
				rss = v << 10
			case "VmHWM:":
				hwm = v << 10
			}
		}
	}
	return rss, hwm
}

// timingSink records when each event id arrived.
type timingSink struct {
	url  string
	srv  *http.Server
	mu   sync.Mutex
	seen map[string]time.Time
}

func newTimingSink() *timingSink {
	s := &timingSink{seen: map[string]time.Time{}}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	s.url = "http://" + ln.Addr().String()
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		id := r.Header.Get("Ce-Id")
		s.mu.Lock()
		s.seen[id] = at
		s.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	})}
	go func() { _ = s.srv.Serve(ln) }()
	return s
}

func (s *timingSink) wait(id string, timeout time.Duration) (time.Time, bool) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		at, ok := s.seen[id]
		s.mu.Unlock()
		if ok {
			return at, true
		}
		time.Sleep(time.Millisecond)
	}
	return time.Time{}, false
}

func (s *timingSink) close() { _ = s.srv.Close() }
