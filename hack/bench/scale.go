package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/localstack"
	"github.com/async-helm/async-helm/internal/proc"
	"github.com/async-helm/async-helm/internal/satoken"
	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/release"
)

// scaleSection (issue 30): -scale-pending pending revisions (reserved by submit, whose sink
// executes nothing) across -scale-namespaces namespaces. Submit's admission time-to-201
// against the same with 10 pending; one sweeper pass (seconds and API calls) and the RSS of
// a notifier watching those namespaces; the all-namespaces list with limitInfo for a user
// who may read -scale-readable of them, against that user's lists of those namespaces one
// by one.
func (b *bench) scaleSection(ctx context.Context) error {
	var events atomic.Int64
	submit, sinkURL, stop, err := b.submitWithSink(func(*http.Request, []byte) { events.Add(1) })
	if err != nil {
		return err
	}
	defer stop()
	probeNS, cleanup, err := b.namespace(ctx, "scaleprobe")
	if err != nil {
		return err
	}
	defer cleanup()
	t0 := time.Now()
	nss, cleanupAll, err := b.manyNamespaces(ctx, b.o.scaleNamespaces)
	defer cleanupAll()
	if err != nil {
		return err
	}
	b.logf("  %d namespaces created in %s", len(nss), time.Since(t0).Round(time.Millisecond))
	n := &scaleNotifier{b: b, nss: nss, sink: sinkURL, log: filepath.Join(b.logDir, "notifier-scale.log")}
	if err := n.start(); err != nil {
		return err
	}
	defer n.stop()
	sc := newSubmitClient(submit.URL, b.token, b.o.clients)
	few := min(10, b.o.scalePending)
	if err := b.reserveAcross(ctx, sc, nss, 0, few); err != nil {
		return err
	}
	// Each admission run starts once the notifier's status events for the reservations
	// before it are sent: measured while 10,000 of them drained, the p99 at 10,000 pending
	// swung from 0.5x to 3.5x of the same at 10.
	b.logf("  quiet after %s", b.settle(ctx, &events).Round(time.Second))
	low, lowRaw, err := b.admission(ctx, sc, probeNS, "low")
	if err != nil {
		return err
	}
	t0 = time.Now()
	if err := b.reserveAcross(ctx, sc, nss, few, b.o.scalePending); err != nil {
		return err
	}
	b.logf("  %d pending revisions reserved in %s", b.o.scalePending, time.Since(t0).Round(time.Millisecond))
	settled := b.settle(ctx, &events)
	b.logf("  the notifier sent %d events; quiet after %s", events.Load(), settled.Round(time.Second))
	high, highRaw, err := b.admission(ctx, sc, probeNS, "high")
	if err != nil {
		return err
	}
	const sec = "scale"
	where := fmt.Sprintf("%d pending in %d namespaces", b.o.scalePending, len(nss))
	b.compare(sec, "admission with "+where+": time-to-201 p50", msF(high.all.p50), fmt.Sprintf("with %d pending p50", few), msF(low.all.p50), "", nil, high.all.note())
	b.compareRepeated(sec, "admission with "+where+": time-to-201 p99", repeatedOf(high, low, p99ms), "ms", fmt.Sprintf("with %d pending p99", few), "", nil, "1 client")
	b.compareRepeated(sec, "admission with "+where+": time-to-201 p99 beside raw creates", repeatedOf(high, highRaw, p99ms), "ms",
		"raw create p99, same rounds", "", nil, fmt.Sprintf("with %d pending: %.2fx of raw", few, p99ms(low.all)/p99ms(lowRaw.all)))
	if err := n.report(ctx, sec, where); err != nil {
		return err
	}
	return b.scaleList(ctx, sc.url, probeNS, nss)
}

// manyNamespaces creates n namespaces in parallel, labelled with this run; the returned
// func purges their queued reservations and deletes them, also in parallel.
func (b *bench) manyNamespaces(ctx context.Context, n int) ([]string, func(), error) {
	run := fmt.Sprintf("%d", time.Now().UnixNano()%1e8)
	nss := make([]string, n)
	for i := range nss {
		nss[i] = fmt.Sprintf("bench-scale-%s-%d", run, i)
	}
	nsAPI := b.cl.Typed.CoreV1().Namespaces()
	var created atomic.Int64
	err := parallel(n, 64, func(i int) error {
		_, err := nsAPI.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nss[i],
			Labels: map[string]string{"async-helm.io/bench": "scale-" + run}}}, metav1.CreateOptions{})
		if err == nil {
			created.Add(1)
		}
		return err
	})
	cleanup := func() {
		t0 := time.Now()
		_ = parallel(n, 64, func(i int) error {
			b.purge(nss[i])
			_ = nsAPI.Delete(context.Background(), nss[i], metav1.DeleteOptions{})
			return nil
		})
		b.logf("  %d namespaces purged and deleted in %s", n, time.Since(t0).Round(time.Millisecond))
	}
	return nss, cleanup, err
}

// reserveAcross has submit reserve revisions from..to-1, revision i in namespace i mod
// len(nss): pending work, as a burst leaves it when no executor keeps up.
func (b *bench) reserveAcross(ctx context.Context, c *submitClient, nss []string, from, to int) error {
	if to <= from {
		return nil
	}
	r := closedLoop(to-from, b.o.clients, func(i int) error {
		i += from
		return b.retryNamespace(ctx, func() error {
			return c.install(ctx, api.ReleaseRequest{Name: fmt.Sprintf("p%d", i), Namespace: nss[i%len(nss)],
				ChartURL: b.charts.ChartURL("tiny", "0.1.0"), Values: map[string]any{"message": "bench"}})
		})
	})
	if r.ok != r.n {
		return fmt.Errorf("reserve pending revisions: %s", r.note())
	}
	return nil
}

// admission is time-to-201 of -scale-runs installs from one client into ns, whose own
// reservations are purged afterwards (only the pending revisions elsewhere differ).
func (b *bench) admission(ctx context.Context, c *submitClient, ns, prefix string) (sub, raw rounds, err error) {
	install, create, err := b.admissionLoops(ctx, c, ns, prefix)
	if err != nil {
		return sub, raw, err
	}
	rs := closedLoopRounds(b.o.scaleRuns*b.o.repeats, 1, b.o.repeats, install, create)
	b.purge(ns)
	return rs[0], rs[1], nil
}

// admissionLoops are the timed install through c into ns and the raw create beside it.
// The first request is not timed: caches of ns are warm in every run. Its reservation is
// the template of the raw creates.
func (b *bench) admissionLoops(ctx context.Context, c *submitClient, ns, prefix string) (install, create func(int) error, err error) {
	if err := b.retryNamespace(ctx, func() error {
		return c.install(ctx, api.ReleaseRequest{Name: prefix + "warm", Namespace: ns, ChartURL: b.charts.ChartURL("tiny", "0.1.0")})
	}); err != nil {
		return nil, nil, err
	}
	tmpl, err := b.cl.Typed.CoreV1().Secrets(ns).Get(ctx, release.SecretName(prefix+"warm", 1), metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	install = func(i int) error {
		return c.install(ctx, api.ReleaseRequest{Name: fmt.Sprintf("%s%d", prefix, i), Namespace: ns,
			ChartURL: b.charts.ChartURL("tiny", "0.1.0"), Values: map[string]any{"message": "bench"}})
	}
	create = func(i int) error { return b.rawCreate(ctx, ns, tmpl, fmt.Sprintf("%sraw%d", prefix, i)) }
	return install, create, nil
}

// settle waits until the sink has had no event for 2 s (at most 2 minutes): the
// notifier's backlog of status events for the new reservations is drained.
func (b *bench) settle(ctx context.Context, events *atomic.Int64) time.Duration {
	return b.settleWithin(ctx, events, 2*time.Minute)
}

// settleWithin is settle waiting at most limit.
func (b *bench) settleWithin(ctx context.Context, events *atomic.Int64, limit time.Duration) time.Duration {
	t0 := time.Now()
	last, quiet := events.Load(), time.Now()
	for time.Since(t0) < limit && ctx.Err() == nil {
		time.Sleep(250 * time.Millisecond)
		if n := events.Load(); n != last {
			last, quiet = n, time.Now()
		} else if time.Since(quiet) >= 2*time.Second {
			break
		}
	}
	return time.Since(t0)
}

// scaleNotifier is a notifier watching the scale section's namespaces, its API requests
// going through a countingProxy, logging at debug level (its "sweep pass" lines).
type scaleNotifier struct {
	b       *bench
	nss     []string
	sink    string
	proxy   *countingProxy
	p       *proc.Process
	stopFns []func()
	log     string
	rss0    int64
}

const scaleSweepInterval = 5 * time.Second

func (n *scaleNotifier) start() error {
	proxy, err := startCountingProxy(n.b.cl.Config, n.b.logDir)
	if err != nil {
		return err
	}
	n.proxy = proxy
	n.stopFns = append(n.stopFns, proxy.close)
	_ = os.Remove(n.log)
	p, err := n.b.startAs("notifier", "notifier-scale", 0, "K_SINK="+n.sink, "NAMESPACES="+strings.Join(n.nss, ","),
		"KUBECONFIG="+proxy.kubeconfig, "LOG_LEVEL=debug", fmt.Sprintf("SWEEP_INTERVAL=%s", scaleSweepInterval),
		// A Lease of its own: the cluster's other notifiers elect on the default one.
		"LEADER_ELECTION_NAME="+localstack.NotifierLease(n.nss[0]))
	if err != nil {
		return err
	}
	n.p = p
	lease := localstack.NotifierLease(n.nss[0])
	n.stopFns = append(n.stopFns, func() { n.b.deleteElectionLease(lease) }, p.Stop)
	n.rss0, _ = procMem(p.Pid())
	return nil
}

func (n *scaleNotifier) stop() {
	for i := len(n.stopFns) - 1; i >= 0; i-- {
		n.stopFns[i]()
	}
}

// passStats is one sweeper pass as the notifier logs it ("sweep pass").
type passStats struct {
	Seconds  float64 `json:"seconds"`
	APICalls int64   `json:"apiCalls"`
	Pending  int     `json:"pending"`
}

// report adds the sweeper pass and the notifier's RSS. The pass comes from the notifier's
// own "sweep pass" log line when it writes one (seconds, API calls, pending revisions
// looked at); otherwise from the requests it sent through the proxy after a quiet moment:
// a pass begins with a list of pending revisions and ends at the first gap of 500 ms.
func (n *scaleNotifier) report(ctx context.Context, sec, where string) error {
	from := time.Now()
	var pass *passStats
	source := "its \"sweep pass\" log line"
	deadline := from.Add(3 * scaleSweepInterval)
	for pass == nil && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(500 * time.Millisecond)
		pass = n.lastPass(n.b.o.scalePending)
	}
	if pass == nil {
		source = "counted through a proxy in front of the API server"
		pass = n.passFromProxy(from)
	}
	rss, hwm := procMem(n.p.Pid())
	if pass == nil {
		n.b.info(sec, "sweeper pass with "+where, figure{0, "calls"}, "NOT SEEN: no pass line in the log, no pending list through the proxy")
	} else {
		n.b.info(sec, "sweeper pass with "+where+": time", msF(time.Duration(pass.Seconds*float64(time.Second))),
			fmt.Sprintf("%d pending of ours looked at; %s", pass.Pending, source))
		n.b.info(sec, "sweeper pass with "+where+": API calls", figure{float64(pass.APICalls), "calls"}, source)
	}
	total := n.proxy.since(time.Time{})
	n.b.info(sec, "notifier RSS watching "+where, mibF(rss), fmt.Sprintf("%d MiB after start, peak %d MiB; %d API requests in all (NAMESPACES lists the %d: one watch each)",
		n.rss0>>20, hwm>>20, len(total), len(n.nss)))
	return nil
}

// lastPass is the last "sweep pass" line of the notifier's log that looked at >= pending
// revisions (nil: none yet).
func (n *scaleNotifier) lastPass(pending int) *passStats {
	f, err := os.Open(n.log)
	if err != nil {
		return nil
	}
	defer f.Close()
	var last *passStats
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !strings.Contains(string(line), `"sweep pass"`) {
			continue
		}
		var p passStats
		if json.Unmarshal(line, &p) == nil && p.Pending >= pending {
			last = &p
		}
	}
	return last
}

// passFromProxy finds the first pass after from in the proxy's record: it waits two
// intervals, then takes the first list of pending revisions and the requests after it
// until a gap of 500 ms.
func (n *scaleNotifier) passFromProxy(from time.Time) *passStats {
	time.Sleep(2 * scaleSweepInterval)
	var start, end time.Time
	calls := 0
	for _, r := range n.proxy.since(from) {
		if r.verb == "WATCH" {
			continue
		}
		if start.IsZero() {
			if q, _ := url.ParseQuery(r.query); r.verb != "LIST" || q.Get("labelSelector") != release.SelectorPending {
				continue
			}
			start = r.at
		} else if r.at.Sub(end) > 500*time.Millisecond {
			break
		}
		end = r.at
		calls++
	}
	if start.IsZero() {
		return nil
	}
	return &passStats{Seconds: end.Sub(start).Seconds(), APICalls: int64(calls), Pending: -1}
}

// scaleList: a user who may read -scale-readable of the namespaces (a ServiceAccount with
// the edit role in each) lists every namespace with limitInfo, against the same user's
// lists of those namespaces one by one (summed per round).
func (b *bench) scaleList(ctx context.Context, submitURL, home string, nss []string) error {
	readable := nss[:min(b.o.scaleReadable, len(nss))]
	const sa = "scale-reader"
	if _, err := b.cl.Typed.CoreV1().ServiceAccounts(home).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	user := fmt.Sprintf("system:serviceaccount:%s:%s", home, sa)
	for _, ns := range readable {
		if _, err := b.cl.Typed.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: sa},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: home, Name: sa}},
		}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	if err := b.waitAllowed(ctx, readable[len(readable)-1], user); err != nil {
		return err
	}
	token, err := satoken.Request(ctx, b.cl.Typed, home, sa, time.Hour)
	if err != nil {
		return err
	}
	c := newSubmitClient(submitURL, token, 1)
	all := api.PathList + "?limitInfo=true"
	// A failed list (a 500 when the access checks outlast submit's deadline) is a figure
	// here, not the end of the bench: its time stays in the percentiles, its error in a note.
	t0 := time.Now()
	got, err := c.count(ctx, all)
	first := time.Since(t0)
	firstNote := fmt.Sprintf("%d releases", got)
	if err != nil {
		firstNote = "FAILED: " + err.Error()
	}
	b.logf("  all-namespaces list: %s (the user may read %d namespaces)", firstNote, len(readable))
	one := closedLoop(b.o.scaleListRuns, 1, func(int) error {
		for _, ns := range readable {
			if _, err := c.count(ctx, api.PathList+"?"+url.Values{"ns": {ns}, "limitInfo": {"true"}}.Encode()); err != nil {
				return err
			}
		}
		return nil
	})
	const sec = "scale"
	name := fmt.Sprintf("all-namespaces list (limitInfo), user reading %d of %d namespaces", len(readable), len(nss))
	base := fmt.Sprintf("the %d namespaces one by one", len(readable))
	// A first list that failed or took over 20 s is not repeated: the repeats would hold
	// the run for minutes and say the same.
	if err == nil && first < 20*time.Second {
		ours := closedLoop(b.o.scaleListRuns, 1, func(int) error { _, err := c.count(ctx, all); return err })
		b.compare(sec, name+": p50", msF(ours.p50), base+" p50", msF(one.p50), "", nil, ours.note())
		b.compare(sec, name+": p99", msF(ours.p99), base+" p99", msF(one.p99), "<= 2x", atMost(2), "one by one "+one.note())
	}
	b.compare(sec, name+": first list (access checks cold)", msF(first), base+" p50", msF(one.p50), "", nil, firstNote)
	return nil
}

// count fetches a list and returns how many items it holds.
func (c *submitClient) count(ctx context.Context, path string) (int, error) {
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url+path, nil)
	if err != nil {
		return 0, err
	}
	r.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(r)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %d", path, resp.StatusCode)
	}
	var items []json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&items); err != nil {
		return 0, fmt.Errorf("GET %s: %w", path, err)
	}
	return len(items), nil
}
