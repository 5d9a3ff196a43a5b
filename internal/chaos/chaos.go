// Package chaos proves the product under faults against a real API server: an executor
// killed at random during installs, concurrent upgrades of one release, a sink outage under
// the notifier, bursts, and a burst through several instances of every function with one
// executor and one notifier killed. It counts what happened and lists every violation.
// Each scenario runs its own stack (internal/localstack): N instances of each function
// behind one address per function, as Knative spreads a Service over its pods.
package chaos

import (
	"context"
	"crypto/rand"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/eventing"
	"github.com/async-helm/async-helm/internal/localstack"
	"github.com/async-helm/async-helm/internal/operator"
	"github.com/async-helm/async-helm/internal/proc"
	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/kube"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/submitclient"
)

// Config sizes a run.
type Config struct {
	Bins       map[string]string // submit, executor, notifier
	Kubeconfig string
	// Knative is the local Knative Eventing (tools/knative); ConfigDir is config/knative.
	Knative   *eventing.Local
	ConfigDir string
	ChartURL  string // a small chart whose install waits for its pods
	LogDir    string
	Installs  int           // scenario 1: installs while the executor is killed
	Kills     int           // SIGKILLs of the executor during scenario 1
	Upgrades  int           // scenario 2: concurrent upgrades of one release
	Releases  int           // scenario 3: installs while the sink is down
	Outage    time.Duration // scenario 3: how long the sink refuses
	// Scenario 4: a burst of Burst installs from BurstClients clients, once as is and once
	// with the executor SIGKILLed BurstKills times; then OverBound installs against an
	// admission bound of Bound queued revisions per namespace.
	Burst, BurstClients, BurstKills int
	OverBound, Bound                int
	// Counts are the instances of each function in scenarios 1 to 4 (zero: one of each);
	// a kill picks one executor at random.
	Counts localstack.Counts
	// Scenario 5: a burst of Scale installs (from BurstClients clients) through ScaleCounts
	// instances, one executor SIGKILLed and restarted and one notifier SIGKILLed for good
	// during it.
	Scale       int
	ScaleCounts localstack.Counts
	// ScaleSlots is each executor's MAX_PARALLEL in scenario 5 (0: 64, one executor's
	// default, shared among them). The instances share this machine's cores where a
	// cluster's pods have their own: three executors taking 64 actions each ran each action
	// 3 times slower, and most hit the burst's 2 m timeout before Helm even started.
	ScaleSlots int
	// ScaleWait is each install's timeout in scenario 5 (0: 10 m). The 2 m of the other
	// bursts ran out on this machine before Helm started, with seven instances and the
	// API server sharing 2 cores: the scenario is about kills and take-overs, not speed.
	ScaleWait time.Duration
	Timeout   time.Duration // for everything to end
	// Scenarios, when set, runs only these (of ScenarioNames).
	Scenarios []string
	Logf      func(format string, args ...any)
}

// Report is what a run counted, and what went wrong.
type Report struct {
	Lines      []string
	Violations []string
}

func (r *Report) count(format string, args ...any) {
	r.Lines = append(r.Lines, fmt.Sprintf(format, args...))
}

func (r *Report) violate(format string, args ...any) {
	r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
}

type run struct {
	cfg    Config
	cl     *kube.Clients
	client *submitclient.Client
	rep    *Report
	common []string
	own    string // async-helm's own namespace of this run
}

// Run runs the three scenarios.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cl, err := kube.Open(cfg.Kubeconfig)
	if err != nil {
		return nil, err
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	r := &run{cfg: cfg, cl: cl, rep: &Report{}, common: []string{"KUBECONFIG=" + cfg.Kubeconfig, "ALLOW_LOOPBACK_CHARTS=true",
		fmt.Sprintf("EVENT_SIGNING_KEY=%x", key), "LEASE_DURATION=3s", "LOG_LEVEL=warn"}}
	// async-helm's own namespace of this run: where submit binds each accepted request and
	// the executor checks it (make run's namespace may be gone).
	own, err := r.namespace(ctx, "own")
	if err != nil {
		return nil, err
	}
	defer r.cleanup(own)
	r.own = own
	r.common = append(r.common, "ASYNC_HELM_NAMESPACE="+own)
	for _, s := range []struct {
		name string
		run  func(context.Context) error
	}{{"kill", r.killedExecutor}, {"upgrades", r.concurrentUpgrades}, {"sink", r.sinkOutage}, {"bursts", r.bursts}, {"scale", r.scale}} {
		if len(cfg.Scenarios) > 0 && !slices.Contains(cfg.Scenarios, s.name) {
			continue
		}
		if err := s.run(ctx); err != nil {
			return r.rep, err
		}
	}
	return r.rep, nil
}

// ScenarioNames are the names Config.Scenarios picks from, in the order they run.
func ScenarioNames() []string { return []string{"kill", "upgrades", "sink", "bursts", "scale"} }

func (r *run) namespace(ctx context.Context, prefix string) (string, error) {
	name := fmt.Sprintf("chaos-%s-%d", prefix, time.Now().UnixNano()%1e8)
	if _, err := r.cl.Typed.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	for i := 0; i < 200; i++ {
		if _, err := r.cl.Typed.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			return name, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return "", fmt.Errorf("namespace %s has no default ServiceAccount", name)
}

// stackOpts wires one stack: the notifier's namespace and status sink, extra env, and the
// instances (nil: Config.Counts).
type stackOpts struct {
	ns, sink               string
	submitEnv, executorEnv []string
	counts                 *localstack.Counts
}

// stack starts what make run starts, in ns: config/knative's Broker and Triggers on the
// local Knative (retries and dead letters to the notifier by the Triggers' delivery), the
// executors, the notifiers (their status events go to the Broker, and a Trigger delivers
// them to the status sink; their sweeper re-sends to the Broker) and the submits, each
// function behind one address. r.client calls submit's.
func (r *run) stack(ctx context.Context, o stackOpts) (st *localstack.Stack, stop func(), err error) {
	var closers []func()
	// cleanup, not the named result: a failed start returns a nil stop.
	cleanup := func() {
		if st != nil {
			st.Stop()
		}
		for _, c := range closers {
			c()
		}
	}
	defer func() {
		if err != nil {
			cleanup()
		}
	}()
	sinkURL := o.sink
	if sinkURL == "" {
		status := newSink() // status events are not what this stack is checked on
		closers = append(closers, status.close)
		sinkURL = status.url
	}
	counts := r.cfg.Counts
	if o.counts != nil {
		counts = *o.counts
	}
	st, err = localstack.Start(ctx, localstack.Config{Knative: r.cfg.Knative, Rest: r.cl.Config, Namespace: o.ns,
		ConfigDir: r.cfg.ConfigDir, EventLog: sinkURL, WireTimeout: 2 * time.Minute, Bins: r.cfg.Bins, Counts: counts, LogDir: r.cfg.LogDir, Env: r.common,
		FunctionEnv: map[string][]string{
			localstack.Executor: o.executorEnv,
			localstack.Notifier: {"NAMESPACES=" + o.ns, "SWEEP_INTERVAL=2s", "REDRIVE_AFTER=1m", "REAPER_GRACE=10s"},
			localstack.Submit:   o.submitEnv,
		}})
	if err != nil {
		return nil, nil, err
	}
	token, err := operator.Token(ctx, r.cl.Typed, time.Hour) // submit refuses system:masters
	if err != nil {
		return nil, nil, err
	}
	r.client = &submitclient.Client{Server: st.Submit.URL, Token: token}
	return st, cleanup, nil
}

// anyInstance picks one instance of f at random.
func anyInstance(f *localstack.Function) (int, *proc.Process) {
	n, _ := rand.Int(rand.Reader, big.NewInt(int64(len(f.Instances))))
	i := int(n.Int64())
	return i, f.Instances[i]
}

func randomDuration(min, max time.Duration) time.Duration {
	n, _ := rand.Int(rand.Reader, big.NewInt(int64(max-min)))
	return min + time.Duration(n.Int64())
}

// revisions lists the release secrets of ns by release, from labels.
func (r *run) revisions(ctx context.Context, ns string) (map[string][]release.Revision, error) {
	list, err := r.cl.Metadata.Resource(release.SecretsResource).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: release.SelectorReleaseSecrets})
	if err != nil {
		return nil, err
	}
	out := map[string][]release.Revision{}
	for i := range list.Items {
		if rev, ok := release.RevisionFromMeta(&list.Items[i]); ok {
			out[rev.Name] = append(out[rev.Name], rev)
		}
	}
	for _, revs := range out {
		sort.Slice(revs, func(i, j int) bool { return revs[i].Version < revs[j].Version })
	}
	return out, nil
}

// waitFinal waits until no revision in ns is pending.
func (r *run) waitFinal(ctx context.Context, ns string) (map[string][]release.Revision, error) {
	deadline := time.Now().Add(r.cfg.Timeout)
	for {
		revs, err := r.revisions(ctx, ns)
		if err != nil {
			return nil, err
		}
		pending := 0
		for _, rs := range revs {
			for _, rev := range rs {
				if release.IsPending(rev.Status) {
					pending++
				}
			}
		}
		if pending == 0 || time.Now().After(deadline) {
			return revs, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Scenario 1: installs while the executor is SIGKILLed at random moments and restarted;
// the broker redelivers. Every release ends deployed or failed with a reason, none stays
// pending, none gets a second revision.
func (r *run) killedExecutor(ctx context.Context) error {
	ns, err := r.namespace(ctx, "kill")
	if err != nil {
		return err
	}
	defer r.cleanup(ns)
	st, stop, err := r.stack(ctx, stackOpts{ns: ns})
	if err != nil {
		return err
	}
	defer stop()
	var accepted atomic.Int64
	var wg sync.WaitGroup
	sem := make(chan struct{}, 10)
	for i := 0; i < r.cfg.Installs; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			time.Sleep(randomDuration(0, 2*time.Second)) // spread installs over the kills
			_, err := r.client.Install(ctx, api.ReleaseRequest{Name: fmt.Sprintf("k%d", i), Namespace: ns, ChartURL: r.cfg.ChartURL,
				Wait: true, WaitForJobs: true, Timeout: "2m"})
			if err != nil {
				r.rep.violate("install k%d refused: %v", i, err)
				return
			}
			accepted.Add(1)
		}(i)
	}
	kills := 0
	for ; kills < r.cfg.Kills; kills++ {
		time.Sleep(randomDuration(200*time.Millisecond, 1200*time.Millisecond))
		i, executor := anyInstance(st.Executor)
		executor.Kill()
		r.cfg.Logf("%s killed (%d/%d)", localstack.InstanceName(localstack.Executor, i), kills+1, r.cfg.Kills)
		time.Sleep(randomDuration(50*time.Millisecond, 500*time.Millisecond))
		if err := executor.Restart(); err != nil {
			return err
		}
	}
	wg.Wait()
	revs, err := r.waitFinal(ctx, ns)
	if err != nil {
		return err
	}
	deployed, failed, pending := 0, 0, 0
	for i := 0; i < r.cfg.Installs; i++ {
		name := fmt.Sprintf("k%d", i)
		rs := revs[name]
		switch {
		case len(rs) == 0:
			r.rep.violate("release %s has no revision", name)
			continue
		case len(rs) > 1:
			r.rep.violate("release %s has %d revisions: installed twice", name, len(rs))
		}
		switch st := rs[0].Status; {
		case st == "deployed":
			deployed++
		case st == "failed":
			failed++
			rel, err := (&release.Store{Client: r.cl.Typed}).Get(ctx, ns, name, rs[0].Version)
			if err != nil || rel.Info.Description == "" {
				r.rep.violate("release %s failed without a reason", name)
			}
		default:
			pending++
			r.rep.violate("release %s left %s", name, st)
		}
	}
	r.rep.count("executor SIGKILLed %d times during %d installs: %d accepted, %d deployed, %d failed with a reason, %d pending; %s",
		kills, r.cfg.Installs, accepted.Load(), deployed, failed, pending, spread(st))
	return nil
}

// Scenario 2: concurrent upgrades of one release: exactly one 201, revisions without gaps.
func (r *run) concurrentUpgrades(ctx context.Context) error {
	ns, err := r.namespace(ctx, "upgrade")
	if err != nil {
		return err
	}
	defer r.cleanup(ns)
	_, stop, err := r.stack(ctx, stackOpts{ns: ns})
	if err != nil {
		return err
	}
	defer stop()
	if _, err := r.client.Install(ctx, api.ReleaseRequest{Name: "one", Namespace: ns, ChartURL: r.cfg.ChartURL}); err != nil {
		return err
	}
	if _, err := r.waitFinal(ctx, ns); err != nil {
		return err
	}
	var created, conflicts, other atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < r.cfg.Upgrades; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, err := r.client.Upgrade(ctx, api.ReleaseRequest{Name: "one", Namespace: ns, Values: map[string]any{"message": fmt.Sprint(i)}})
			var apiErr *submitclient.APIError
			switch {
			case err == nil:
				created.Add(1)
			case asAPIError(err, &apiErr) && apiErr.Status == http.StatusConflict:
				conflicts.Add(1)
			default:
				other.Add(1)
				r.rep.violate("upgrade %d: %v", i, err)
			}
		}(i)
	}
	wg.Wait()
	revs, err := r.waitFinal(ctx, ns)
	if err != nil {
		return err
	}
	versions := []int{}
	for _, rev := range revs["one"] {
		versions = append(versions, rev.Version)
	}
	for i, v := range versions {
		if v != i+1 {
			r.rep.violate("revision gap: revisions %v", versions)
			break
		}
	}
	if created.Load() != 1 {
		r.rep.violate("%d of %d concurrent upgrades got 201, want exactly 1", created.Load(), r.cfg.Upgrades)
	}
	r.rep.count("%d concurrent upgrades of one release: %d x 201, %d x 409, %d other; revisions %v",
		r.cfg.Upgrades, created.Load(), conflicts.Load(), other.Load(), versions)
	return nil
}

func asAPIError(err error, target **submitclient.APIError) bool {
	e, ok := err.(*submitclient.APIError)
	if ok {
		*target = e
	}
	return ok
}

// Scenario 3: the status events' sink (behind the Broker, reached through a Trigger) is
// down while releases change: Knative redelivers, and once it is back every transition
// arrives.
func (r *run) sinkOutage(ctx context.Context) error {
	ns, err := r.namespace(ctx, "sink")
	if err != nil {
		return err
	}
	defer r.cleanup(ns)
	sink := newSink()
	defer sink.close()
	sink.down.Store(true)
	_, stop, err := r.stack(ctx, stackOpts{ns: ns, sink: sink.url})
	if err != nil {
		return err
	}
	defer stop()
	requestIDs := map[int]string{}
	for i := 0; i < r.cfg.Releases; i++ {
		sec, err := r.client.Install(ctx, api.ReleaseRequest{Name: fmt.Sprintf("s%d", i), Namespace: ns, ChartURL: r.cfg.ChartURL, Wait: true})
		if err != nil {
			return err
		}
		requestIDs[i] = sec.Labels[release.LabelRequestID]
	}
	time.Sleep(r.cfg.Outage)
	refused := sink.refused.Load()
	sink.down.Store(false)
	if _, err := r.waitFinal(ctx, ns); err != nil {
		return err
	}
	want := map[string]bool{}
	for i := 0; i < r.cfg.Releases; i++ {
		for _, st := range []string{"pending-install", "deployed"} {
			want[events.StatusEventID(ns, fmt.Sprintf("s%d", i), 1, st, requestIDs[i])] = true
		}
	}
	deadline := time.Now().Add(r.cfg.Timeout)
	for time.Now().Before(deadline) && sink.missing(want) > 0 {
		time.Sleep(500 * time.Millisecond)
	}
	lost := sink.missing(want)
	if lost > 0 {
		r.rep.violate("%d status events lost across a %s sink outage", lost, r.cfg.Outage)
	}
	r.rep.count("sink down %s during %d installs: %d deliveries refused, %d of %d transitions received after, %d lost",
		r.cfg.Outage, r.cfg.Releases, refused, len(want)-lost, len(want), lost)
	return nil
}

func (r *run) cleanup(ns string) {
	_ = r.cl.Typed.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
}

// sink records event ids; while down it answers 503.
type sink struct {
	url     string
	srv     *http.Server
	down    atomic.Bool
	refused atomic.Int64
	mu      sync.Mutex
	seen    map[string]bool
}

func newSink() *sink {
	s := &sink{seen: map[string]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return s
	}
	s.url = "http://" + ln.Addr().String()
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if s.down.Load() {
			s.refused.Add(1)
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		s.mu.Lock()
		s.seen[req.Header.Get("Ce-Id")] = true
		s.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	})}
	go func() { _ = s.srv.Serve(ln) }()
	return s
}

func (s *sink) missing(want map[string]bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for id := range want {
		if !s.seen[id] {
			n++
		}
	}
	return n
}

func (s *sink) close() {
	if s.srv != nil {
		_ = s.srv.Close()
	}
}
