package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/ledger"
	"github.com/async-helm/async-helm/pkg/progress"
	"github.com/async-helm/async-helm/pkg/submitclient"
)

// Sizes of the burst: issue 43's, 1,000 installs from 50 clients over two namespaces, or
// what A alone completes in fairDrain at the rate measured just before (fairProbe installs),
// and at least fairMinBurst: a loaded machine gets a burst it drains in bounded time. The
// backlog ahead of B's first installs is then still several times fairBound, so on a
// first-come-first-served executor each of them waits for that backlog. The chart is one
// ConfigMap (testdata/charts/note): what is shared is the executor's slots, and a thousand
// Deployments and Jobs would only load the cluster's controllers.
const (
	fairBurst    = 1000
	fairMinBurst = 100
	fairProbe    = 40
	fairDrain    = 4 * time.Minute
	fairClients  = 50
	fairSlots    = 4
	fairChart    = "note"
)

// burstSize is the burst A alone drains in fairDrain at rate installs/s, within
// fairMinBurst..fairBurst.
func burstSize(rate float64) int {
	return min(fairBurst, max(fairMinBurst, int(rate*fairDrain.Seconds())))
}

// Tenant A (dev, edit in two namespaces) sends a burst of installs from 50 clients, sized
// from A's rate alone (burstSize); tenant B (the operator, another namespace) installs one
// release every 5 s while A drains. Each of B's installs waits for a few of A's actions,
// not for A's backlog: the number of A's installs that end deployed between B's 201 and
// B's deployed is bounded by the slots, whatever the backlog was when B was accepted. Every one of A's accepted installs and
// every one of B's ends deployed. B's times against B alone are logged (median and worst,
// floor 1 s), not asserted: the ratios are make bench's fairness section.
func TestFairShareBurst(t *testing.T) {
	t.Parallel()
	start := time.Now()
	nsA1, nsA2, nsB, own := cluster.Namespace(t), cluster.Namespace(t), cluster.Namespace(t), cluster.Namespace(t)
	grantDev(t, nsA1, "edit")
	grantDev(t, nsA2, "edit")
	// At the executor's defaults A's backlog waits in A's queue of the executor, not in the
	// Broker's backoff (docs/design.md, "Tenants and shares").
	s := newStackEnv(t, ownNamespaceEnv(own, stackEnv{
		Submit:   map[string]string{"MAX_QUEUED": "0", "MAX_QUEUED_PER_NAMESPACE": "0"},
		Executor: map[string]string{"MAX_PARALLEL": fmt.Sprint(fairSlots)},
	}), nsA1, nsA2, nsB)
	w := watchDeployed(t, nsA1, nsA2, nsB)
	chart := s.charts.ChartURL(fairChart, "0.1.0")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	b := &fairTenantB{s: s, w: w, ns: nsB, chart: chart}

	// B alone: its idle time from 201 to deployed, after a first install that warms the
	// stack (chart cache, access reviews, discovery).
	b.installAndWait(t, ctx, "warm")
	var idle []time.Duration
	for i := range 3 {
		idle = append(idle, b.installAndWait(t, ctx, fmt.Sprintf("idle-%d", i)))
	}
	idleMedian := median(idle)
	t.Logf("B alone, 201 to deployed: %v (median %s)", idle, idleMedian)

	size := burstSize(probeRate(t, ctx, s, w, chart, nsA1, nsA2))
	a := startTenantA(t, ctx, s, chart, size, nsA1, nsA2)
	var windows []fairWindow
	sharesSeen := false
	for i := 0; !a.drained(w) && ctx.Err() == nil; i++ {
		windows = append(windows, b.installAsync(t, ctx, fmt.Sprintf("b-%02d", i)))
		sharesSeen = sharesSeen || sharesShown(t, s, "dev", nsA1, nsA2)
		time.Sleep(5 * time.Second)
	}
	if !sharesSeen {
		t.Error("submit's and the executor's metrics never showed A's queue and slots (sharesShown)")
	}
	a.wait()
	if missing := a.notDeployed(w); len(missing) > 0 {
		ns, name, _ := strings.Cut(missing[0], "/")
		t.Fatalf("A: %d of %d accepted installs not deployed (%d seen failed), e.g. %v; %s: %+v", len(missing), len(a.accepted),
			w.failures(), missing[:min(5, len(missing))], missing[0], s.getRelease(t, ns, name).Info)
	}
	if len(a.accepted) != size {
		t.Fatalf("A: %d of %d installs accepted", len(a.accepted), size)
	}
	for i := range windows {
		windows[i].deployed = b.waitDeployed(t, ctx, windows[i].name)
	}
	t.Logf("A: %d installs accepted in %s, all deployed %s after the first 201", size,
		a.acceptedIn().Round(time.Millisecond), w.last(nsA1, nsA2).Sub(a.first()).Round(time.Millisecond))
	checkFairWindows(t, windows, a, w, idleMedian, nsA1, nsA2)
	t.Logf("test took %s", time.Since(start).Round(time.Second))
}

// fairBound is how many of A's installs may end while one of B's waits: B's delivery takes
// the next free slot (at most all slots end first), then runs beside A's actions on the
// other slots; the rest is the delivery's and the watch's lag.
const fairBound = 6 * fairSlots

// checkFairWindows asserts fairBound for every install of B accepted while A's backlog was
// over twice the bound (where a FIFO executor makes B wait for the backlog), and logs B's
// ratios to its idle time.
func checkFairWindows(t *testing.T, windows []fairWindow, a *tenantA, w *deployWatch, idle time.Duration, nsA ...string) {
	t.Helper()
	floor := max(idle, time.Second)
	var ratios []float64
	measured := 0
	for _, win := range windows {
		wait := win.deployed.Sub(win.accepted)
		ratios = append(ratios, float64(wait)/float64(floor))
		backlog := a.acceptedBefore(win.accepted) - w.deployedBy(win.accepted, burstPrefix, nsA...)
		during := w.deployedBy(win.deployed, burstPrefix, nsA...) - w.deployedBy(win.accepted, burstPrefix, nsA...)
		t.Logf("B %s: 201 to deployed %s (%.1fx idle); A's backlog at its 201: %d; A's installs deployed meanwhile: %d",
			win.name, wait.Round(time.Millisecond), ratios[len(ratios)-1], backlog, during)
		if backlog <= 2*fairBound {
			continue
		}
		measured++
		if during > fairBound {
			t.Errorf("B %s waited for %d of A's installs (backlog %d), want at most %d: it queued behind A's backlog",
				win.name, during, backlog, fairBound)
		}
	}
	if measured == 0 {
		t.Fatalf("no install of B was accepted while A's backlog was over %d: the burst is too small to show anything", 2*fairBound)
	}
	slices.Sort(ratios)
	t.Logf("B under A's burst, 201 to deployed against B alone (%s, floor 1 s): median %.1fx, worst %.1fx over %d installs (%d behind a backlog)",
		idle.Round(time.Millisecond), ratios[len(ratios)/2], ratios[len(ratios)-1], len(ratios), measured)
}

// sharesShown reports whether the metrics show tenant user's share while its burst drains:
// submit's queue of the caller over its namespaces (the ledger's caller key) and the
// executor's action slots held by the caller in one of them.
func sharesShown(t *testing.T, s *stack, user string, namespaces ...string) bool {
	t.Helper()
	queued := regexp.MustCompile(`asynchelm_queue_caller_revisions\{caller="` + ledger.CallerKey(user) + `"\} ([1-9]\d*)`).FindString(metrics(t, s.submit.URL))
	held := ""
	for _, ns := range namespaces {
		if held == "" {
			held = regexp.MustCompile(`asynchelm_executor_slots_held\{caller="` + user + `",namespace="` + ns + `",pool="action"\} [1-9]`).
				FindString(metrics(t, s.executor.URL))
		}
	}
	if queued == "" || held == "" {
		return false
	}
	t.Logf("submit: %s; executor: %s", queued, held)
	return true
}

// ownNamespaceEnv gives every function of the stack async-helm's own namespace own: the
// ledger, the consumed records and the notifier's election of this test alone, so other
// tests' accepted work does not count in its admission.
func ownNamespaceEnv(own string, env stackEnv) stackEnv {
	for _, m := range []*map[string]string{&env.Submit, &env.Executor, &env.Notifier} {
		if *m == nil {
			*m = map[string]string{}
		}
		(*m)["ASYNC_HELM_NAMESPACE"] = own
	}
	return env
}

// probeRate sends fairProbe installs as A alone (dev, over its namespaces, from
// fairClients clients) and returns the rate they were deployed at, first to last deployed:
// the machine's rate now, its start-up lag left out.
func probeRate(t *testing.T, ctx context.Context, s *stack, w *deployWatch, chart string, ns ...string) float64 {
	t.Helper()
	dev := asDev(s)
	var wg sync.WaitGroup
	for c := range fairClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; i < fairProbe; i += fairClients {
				req := api.ReleaseRequest{Name: fmt.Sprintf("%s%02d", probePrefix, i), Namespace: ns[i%len(ns)], ChartURL: chart}
				if _, err := dev.Install(ctx, req); err != nil {
					t.Errorf("A's probe: install %s/%s: %v", req.Namespace, req.Name, err)
				}
			}
		}()
	}
	wg.Wait()
	var first, last time.Time
	for i := range fairProbe {
		at, ok := w.waitFor(ctx, ns[i%len(ns)], fmt.Sprintf("%s%02d", probePrefix, i))
		if !ok {
			t.Fatalf("A's probe: %s%02d never deployed", probePrefix, i)
		}
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	rate := float64(fairProbe-1) / max(last.Sub(first).Seconds(), 0.001)
	t.Logf("A alone: %d installs deployed at %.2f/s: a burst of %d (%s at that rate; %d..%d)",
		fairProbe, rate, burstSize(rate), fairDrain, fairMinBurst, fairBurst)
	return rate
}

// Names of A's probe and burst installs.
const (
	probePrefix = "p-"
	burstPrefix = "a-"
)

// tenantA is dev's burst: size installs over two namespaces from fairClients clients.
type tenantA struct {
	wg       sync.WaitGroup
	mu       sync.Mutex
	sent     bool
	accepted []acceptedInstall
}

// acceptedInstall is one of A's installs that got its 201, and when.
type acceptedInstall struct {
	namespace, name string
	at              time.Time
}

func startTenantA(t *testing.T, ctx context.Context, s *stack, chart string, size int, ns ...string) *tenantA {
	a := &tenantA{}
	dev := asDev(s)
	next := make(chan int)
	for range fairClients {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			for i := range next {
				req := api.ReleaseRequest{Name: fmt.Sprintf("%s%04d", burstPrefix, i), Namespace: ns[i%len(ns)], ChartURL: chart}
				if _, err := dev.Install(ctx, req); err != nil {
					t.Errorf("A: install %s/%s: %v", req.Namespace, req.Name, err)
					continue
				}
				a.mu.Lock()
				a.accepted = append(a.accepted, acceptedInstall{namespace: req.Namespace, name: req.Name, at: time.Now()})
				a.mu.Unlock()
			}
		}()
	}
	go func() {
		defer close(next)
		for i := range size {
			next <- i
		}
	}()
	go func() {
		a.wg.Wait()
		a.mu.Lock()
		a.sent = true
		a.mu.Unlock()
	}()
	return a
}

func (a *tenantA) wait() { a.wg.Wait() }

// drained reports whether every install was sent and each accepted one is final (deployed,
// or failed: the test then fails at once rather than at its context).
func (a *tenantA) drained(w *deployWatch) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.sent {
		return false
	}
	for _, i := range a.accepted {
		if !w.has(i.namespace, i.name) && !w.hasFailed(i.namespace, i.name) {
			return false
		}
	}
	return true
}

// notDeployed lists A's accepted installs not seen deployed.
func (a *tenantA) notDeployed(w *deployWatch) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, i := range a.accepted {
		if !w.has(i.namespace, i.name) {
			out = append(out, i.namespace+"/"+i.name)
		}
	}
	return out
}

func (a *tenantA) times() []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]time.Time, len(a.accepted))
	for i, x := range a.accepted {
		out[i] = x.at
	}
	return out
}

func (a *tenantA) first() time.Time { return slices.MinFunc(a.times(), time.Time.Compare) }

func (a *tenantA) acceptedIn() time.Duration {
	return slices.MaxFunc(a.times(), time.Time.Compare).Sub(a.first())
}

// acceptedBefore is how many of A's installs had their 201 by t.
func (a *tenantA) acceptedBefore(t time.Time) int {
	n := 0
	for _, at := range a.times() {
		if !at.After(t) {
			n++
		}
	}
	return n
}

// fairTenantB is the operator installing tiny releases into its own namespace.
type fairTenantB struct {
	s     *stack
	w     *deployWatch
	ns    string
	chart string
}

// fairWindow is one of B's installs: its 201 and when it was seen deployed.
type fairWindow struct {
	name               string
	accepted, deployed time.Time
}

func (b *fairTenantB) installAsync(t *testing.T, ctx context.Context, name string) fairWindow {
	t.Helper()
	if _, err := b.s.client.Install(ctx, api.ReleaseRequest{Name: name, Namespace: b.ns, ChartURL: b.chart}); err != nil {
		t.Fatalf("B: install %s: %v", name, err)
	}
	return fairWindow{name: name, accepted: time.Now()}
}

func (b *fairTenantB) installAndWait(t *testing.T, ctx context.Context, name string) time.Duration {
	t.Helper()
	win := b.installAsync(t, ctx, name)
	return b.waitDeployed(t, ctx, name).Sub(win.accepted)
}

func (b *fairTenantB) waitDeployed(t *testing.T, ctx context.Context, name string) time.Time {
	t.Helper()
	at, ok := b.w.waitFor(ctx, b.ns, name)
	if !ok {
		t.Fatalf("B: %s/%s never deployed: %+v", b.ns, name, b.s.getRelease(t, b.ns, name).Info)
	}
	return at
}

// deployWatch records when each release's first revision was first seen deployed, from a
// watch of the Helm Secrets' labels (one clock for every tenant), and which were seen failed.
type deployWatch struct {
	mu     sync.Mutex
	at     map[string]map[string]time.Time // namespace, release
	failed map[string]map[string]bool
}

func watchDeployed(t *testing.T, namespaces ...string) *deployWatch {
	t.Helper()
	mc, err := metadata.NewForConfig(cluster.Admin)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w := &deployWatch{at: map[string]map[string]time.Time{}, failed: map[string]map[string]bool{}}
	for _, ns := range namespaces {
		w.at[ns], w.failed[ns] = map[string]time.Time{}, map[string]bool{}
		f := metadatainformer.NewFilteredSharedInformerFactory(mc, 0, ns, func(o *metav1.ListOptions) {
			o.LabelSelector = "owner=helm,status in (deployed,failed)"
		})
		inf := f.ForResource(corev1.SchemeGroupVersion.WithResource("secrets")).Informer()
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: w.seen, UpdateFunc: func(_, o any) { w.seen(o) }}); err != nil {
			t.Fatal(err)
		}
		f.Start(ctx.Done())
		f.WaitForCacheSync(ctx.Done())
	}
	return w
}

func (w *deployWatch) seen(o any) {
	m, ok := o.(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if m.Labels["status"] == "failed" {
		if byName := w.failed[m.Namespace]; byName != nil {
			byName[m.Labels["name"]] = true
		}
		return
	}
	if byName := w.at[m.Namespace]; byName != nil {
		if _, ok := byName[m.Labels["name"]]; !ok {
			byName[m.Labels["name"]] = now
		}
	}
}

// has reports whether ns/name was seen deployed.
func (w *deployWatch) has(ns, name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.at[ns][name]
	return ok
}

// hasFailed reports whether a revision of ns/name was seen failed.
func (w *deployWatch) hasFailed(ns, name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed[ns][name]
}

// failures is how many releases were seen failed.
func (w *deployWatch) failures() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, byName := range w.failed {
		n += len(byName)
	}
	return n
}

// deployedBy is how many releases of namespaces named prefix... were seen deployed by t
// (zero: ever).
func (w *deployWatch) deployedBy(t time.Time, prefix string, namespaces ...string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, ns := range namespaces {
		for name, at := range w.at[ns] {
			if strings.HasPrefix(name, prefix) && (t.IsZero() || !at.After(t)) {
				n++
			}
		}
	}
	return n
}

func (w *deployWatch) last(namespaces ...string) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	var last time.Time
	for _, ns := range namespaces {
		for _, at := range w.at[ns] {
			if at.After(last) {
				last = at
			}
		}
	}
	return last
}

// waitFor waits until ns/name is seen deployed (false when ctx ends first).
func (w *deployWatch) waitFor(ctx context.Context, ns, name string) (time.Time, bool) {
	for {
		w.mu.Lock()
		at, ok := w.at[ns][name]
		w.mu.Unlock()
		if ok {
			return at, true
		}
		select {
		case <-ctx.Done():
			return time.Time{}, false
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// Tenant A sends twice the executor's action slots of installs with wait (timeout 30m,
// retries 3) whose pods never become ready, then fills its two namespaces' admission bound
// (MAX_QUEUED is twice MAX_QUEUED_PER_NAMESPACE) and gets 429 with Retry-After in both.
// B is still admitted, and its tiny install ends deployed beside A's waits (the issue's
// target is 30 s; the test's bound is a liveness bound of 60 s, the time is logged).
func TestFairShareLongWaitsAndAdmission(t *testing.T) {
	t.Parallel()
	start := time.Now()
	nsA1, nsA2, nsB, own := cluster.Namespace(t), cluster.Namespace(t), cluster.Namespace(t), cluster.Namespace(t)
	grantDev(t, nsA1, "edit")
	grantDev(t, nsA2, "edit")
	const slots, perNamespace = 2, 4
	s := newStackEnv(t, ownNamespaceEnv(own, stackEnv{
		Submit:   map[string]string{"MAX_QUEUED": fmt.Sprint(2 * perNamespace), "MAX_QUEUED_PER_NAMESPACE": fmt.Sprint(perNamespace)},
		Executor: map[string]string{"MAX_PARALLEL": fmt.Sprint(slots)},
	}), nsA1, nsA2, nsB)
	w := watchDeployed(t, nsB)
	chart := s.charts.ChartURL("tiny", "0.1.0")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dev := asDev(s)
	b := &fairTenantB{s: s, w: w, ns: nsB, chart: chart}

	stuck := make([]string, 2*slots)
	for i := range stuck {
		stuck[i] = fmt.Sprintf("stuck-%d", i)
		if _, err := dev.Install(ctx, api.ReleaseRequest{Name: stuck[i], Namespace: nsA1, ChartURL: chart, Wait: true, Timeout: "30m", Retries: 3,
			Values: map[string]any{"podAnnotations": map[string]any{"async-helm.io/simulate": "stuck"}}}); err != nil {
			t.Fatalf("A: install %s: %v", stuck[i], err)
		}
	}
	t.Cleanup(func() { cancelAll(t, dev, nsA1, stuck) })
	waitWaiting(t, s, nsA1, stuck, slots)

	// Admission: A fills its two namespaces' bound (its queued installs with wait count).
	// Nothing of A's can start meanwhile: its waits hold every slot and A is at its share.
	fills := fillBound(t, s, chart, nsA1, nsA2)
	t.Cleanup(func() {
		for _, n := range fills {
			cancelAll(t, dev, n[0], []string{n[1]})
		}
	})
	win := fairWindow{name: "admitted"}
	if code, _ := postInstall(t, s, cluster.Operator.BearerToken, api.ReleaseRequest{Name: win.name, Namespace: nsB, ChartURL: chart}); code != http.StatusCreated {
		t.Fatalf("B: install while A holds its bound: HTTP %d, want 201", code)
	}
	win.accepted = time.Now()
	// The target is 30 s; 60 s is the test's failure bound.
	live, cancelLive := context.WithTimeout(ctx, 60*time.Second)
	defer cancelLive()
	took := b.waitDeployed(t, live, win.name).Sub(win.accepted)
	t.Logf("B beside %d of A's installs waiting on pods that never become ready: 201 to deployed in %s", 2*slots, took.Round(time.Millisecond))
	t.Logf("test took %s", time.Since(start).Round(time.Second))
}

// fillBound sends A's tiny installs into each namespace until it is refused, which must
// be a 429 with Retry-After; it returns the installs accepted (namespace, name).
func fillBound(t *testing.T, s *stack, chart string, namespaces ...string) [][2]string {
	t.Helper()
	var accepted [][2]string
	for _, ns := range namespaces {
		for i := 0; ; i++ {
			name := fmt.Sprintf("fill-%d", i)
			code, retry := postInstall(t, s, cluster.Dev.BearerToken, api.ReleaseRequest{Name: name, Namespace: ns, ChartURL: chart})
			if code == http.StatusCreated {
				accepted = append(accepted, [2]string{ns, name})
				continue
			}
			if code != http.StatusTooManyRequests || retry == "" {
				t.Fatalf("A: install %s/%s: HTTP %d, Retry-After %q; want 201 or 429 with Retry-After", ns, name, code, retry)
			}
			t.Logf("A: %s refused after %d more installs: 429, Retry-After %s", ns, i, retry)
			break
		}
	}
	return accepted
}

// waitWaiting waits until n of names in ns are waiting on their pods.
func waitWaiting(t *testing.T, s *stack, ns string, names []string, n int) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(250 * time.Millisecond) {
		waiting := 0
		for _, name := range names {
			if p := s.getRelease(t, ns, name).Progress; p != nil && p.Phase == progress.PhaseWaiting {
				waiting++
			}
		}
		if waiting >= n {
			t.Logf("A: %d of %d installs waiting on their pods", waiting, len(names))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("A: %d of %d installs waiting after 2 minutes, want %d", waiting, len(names), n)
		}
	}
}

// cancelAll cancels the pending revision of each release (the test's end needs none of them).
func cancelAll(t *testing.T, c *submitclient.Client, ns string, names []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, name := range names {
		if _, err := c.Cancel(ctx, ns, name); err != nil {
			t.Logf("cancel %s/%s: %v", ns, name, err)
		}
	}
}

// postInstall sends an install as token and returns the status and Retry-After; it logs
// a refusal's message.
func postInstall(t *testing.T, s *stack, token string, req api.ReleaseRequest) (int, string) {
	t.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	hreq, err := http.NewRequest(http.MethodPost, s.submit.URL+api.PathAsync, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		t.Logf("install %s/%s: HTTP %d: %s", req.Namespace, req.Name, resp.StatusCode, bytes.TrimSpace(msg))
	}
	return resp.StatusCode, resp.Header.Get("Retry-After")
}
