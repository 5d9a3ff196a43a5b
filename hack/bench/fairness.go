package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/async-helm/async-helm/internal/satoken"
	"github.com/async-helm/async-helm/internal/testcluster"
	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/ledger"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
)

// fairnessEvery is how often tenant B installs while A's burst drains (issue 43).
const fairnessEvery = 5 * time.Second

// fairnessRounds split A's burst in two, so that each side runs twice in the order alone,
// beside, beside, alone: the machine's load drifts during a section (other users of a shared
// machine, namespaces of earlier sections being deleted), and then falls on both sides alike.
const fairnessRounds = 2

// fairnessSection (issue 43): tenant A (the bench's operator, one caller over two
// namespaces, alternately) sends -fair-installs tiny installs from -burst-clients clients
// through make run's stack
// (default executor slots), in halves alone and beside tenant B (a ServiceAccount with edit
// in another namespace), who installs one tiny release every 5 s while A drains. B also
// installs alone before each round. Beside their floors from the same run: B's
// 201-to-deployed under A's burst against B alone (floor 1 s; targets 3x at the median, 6x
// at the worst), A's completed installs/s with B against A alone (work-conserving:
// >= 0.9x), A's and B's together against A alone (shown: whether capacity was lost or
// went to B), and B's time-to-201 during the burst against B alone.
func (b *bench) fairnessSection(ctx context.Context) error {
	var tenants []string
	defer func() { b.forgetConsumed(tenants...) }() // last: once the stack has stopped
	nsA, st, done, err := b.stackIn(ctx, "fair", stackOptions{})
	if err != nil {
		return err
	}
	defer done()
	nsA2, cleanupA2, err := b.namespace(ctx, "faira")
	if err != nil {
		return err
	}
	defer cleanupA2()
	nsB, cleanupB, err := b.namespace(ctx, "fairb")
	if err != nil {
		return err
	}
	defer cleanupB()
	tenants = []string{nsA, nsA2, nsB}
	tokenB, err := b.editorToken(ctx, nsB, "tenant-b")
	if err != nil {
		return err
	}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	w, err := b.watchReleases(wctx, tenants...)
	if err != nil {
		return err
	}
	t := &fairTenants{b: b, w: w, a: newSubmitClient(st.Submit.URL, b.token, b.o.burstClients+1), bc: newSubmitClient(st.Submit.URL, tokenB, 4),
		nsA: []string{nsA, nsA2}, nsB: nsB, chart: b.charts.ChartURL("tiny", "0.1.0"), have: map[string]int{}}
	// Warm-ups: each tenant's first install (chart cache, access reviews, discovery).
	for _, w := range []struct {
		c  *submitClient
		ns string
	}{{t.a, nsA}, {t.a, nsA2}, {t.bc, nsB}} {
		if err := b.retryNamespace(ctx, func() error { return w.c.install(ctx, t.request(w.ns, "warm")) }); err != nil {
			return fmt.Errorf("warm-up install in %s: %w", w.ns, err)
		}
		if _, note, err := t.waitBurst(ctx, w.ns, 1, 5*time.Minute); err != nil {
			return err
		} else if note != "" {
			return fmt.Errorf("warm-up install in %s%s", w.ns, note)
		}
		t.have[w.ns] = 1
	}
	r, err := t.rounds(ctx)
	if err != nil {
		return err
	}
	t.report(r)
	return nil
}

// fairRuns are the section's measurements, summed over its rounds.
type fairRuns struct {
	bAlone, beside []bSample
	aAlone, aWithB aRun
}

// rounds runs B alone and then A's two halves in each round, alone first in even rounds
// and beside first in odd ones.
func (t *fairTenants) rounds(ctx context.Context) (fairRuns, error) {
	var r fairRuns
	per := max(1, t.b.o.fairInstalls/fairnessRounds)
	for round := range fairnessRounds {
		alone, err := t.bAlone(ctx, fmt.Sprintf("alone%d-", round), 3)
		if err != nil {
			return r, err
		}
		r.bAlone = append(r.bAlone, alone...)
		for k := range 2 {
			if (round+k)%2 == 0 {
				run, err := t.aBurst(ctx, fmt.Sprintf("a%d-", round), per, nil)
				if err != nil {
					return r, err
				}
				r.aAlone = r.aAlone.plus(run)
				continue
			}
			run, err := t.aBurst(ctx, fmt.Sprintf("b%d-", round), per, &r.beside)
			if err != nil {
				return r, err
			}
			r.aWithB = r.aWithB.plus(run)
		}
	}
	return r, nil
}

// fairTenants are the two tenants of the section: A's and B's clients and namespaces.
type fairTenants struct {
	b     *bench
	w     *releaseWatch
	a, bc *submitClient
	nsA   []string // A's two namespaces: one caller, its installs alternate between them
	nsB   string
	chart string
	// have is how many revisions each of A's namespaces holds (the warm-ups' and earlier
	// bursts').
	have map[string]int
}

func (t *fairTenants) request(ns, name string) api.ReleaseRequest {
	return api.ReleaseRequest{Name: name, Namespace: ns, ChartURL: t.chart, Values: map[string]any{"message": "bench"}}
}

// bSample is one install of B: its time-to-201 and its 201-to-deployed.
type bSample struct {
	to201, toDeployed time.Duration
	err               error
}

// bInstall installs name as B and waits until it is deployed.
func (t *fairTenants) bInstall(ctx context.Context, name string) bSample {
	t0 := time.Now()
	if err := t.bc.install(ctx, t.request(t.nsB, name)); err != nil {
		return bSample{err: err}
	}
	s := bSample{to201: time.Since(t0)}
	t1 := time.Now()
	s.err = t.w.waitDeployed(ctx, t.nsB, name, 10*time.Minute)
	s.toDeployed = time.Since(t1)
	return s
}

// bAlone is n installs of B one after the other, nothing else running.
func (t *fairTenants) bAlone(ctx context.Context, prefix string, n int) ([]bSample, error) {
	out := make([]bSample, n)
	for i := range out {
		if out[i] = t.bInstall(ctx, fmt.Sprintf("%s%d", prefix, i)); out[i].err != nil {
			return nil, fmt.Errorf("B alone: %w", out[i].err)
		}
	}
	return out, nil
}

// aRun is A's bursts of one side: how many of its installs were deployed and in what time
// (first request to the last final, summed over the bursts), how many of B's deployed
// meanwhile, the load average at each start, and a note when one did not finish.
type aRun struct {
	sent, deployed, bDeployed int
	wall                      time.Duration
	loads, notes              []string
}

// plus is r and o summed.
func (r aRun) plus(o aRun) aRun {
	return aRun{sent: r.sent + o.sent, deployed: r.deployed + o.deployed, bDeployed: r.bDeployed + o.bDeployed, wall: r.wall + o.wall,
		loads: append(r.loads, o.loads...), notes: append(r.notes, o.notes...)}
}

// note says what was deployed of what was sent, and the loads the bursts started at.
func (r aRun) note() string {
	return fmt.Sprintf("%d of %d deployed in %s (load at the starts: %s)%s", r.deployed, r.sent, r.wall.Round(time.Millisecond),
		strings.Join(r.loads, "; "), strings.Join(r.notes, ""))
}

// aBurst sends n installs of A (names prefix<i>) into nsA; with beside set, B installs
// every fairnessEvery until A's are final and its samples go there.
func (t *fairTenants) aBurst(ctx context.Context, prefix string, n int, beside *[]bSample) (aRun, error) {
	b := t.b
	b.clearWorkloads(ctx, t.nsA...)
	stopB, bDone := make(chan struct{}), make(chan []bSample, 1)
	if beside != nil {
		go func() { bDone <- t.bEvery(ctx, prefix, stopB) }()
	}
	load, t0 := loadAvg(), time.Now()
	accepted := map[string]*atomic.Int64{} // per namespace; only read while the loop runs
	for _, ns := range t.nsA {
		accepted[ns] = &atomic.Int64{}
	}
	sent := closedLoop(n, b.o.burstClients, func(i int) error {
		ns := t.nsA[i%len(t.nsA)]
		if err := t.a.install(ctx, t.request(ns, fmt.Sprintf("%s%d", prefix, i))); err != nil {
			return err
		}
		accepted[ns].Add(1)
		return nil
	})
	run := aRun{sent: n, loads: []string{load}}
	var err error
	for _, ns := range t.nsA {
		want := t.have[ns] + int(accepted[ns].Load())
		deployed, unfinished, werr := t.waitBurst(ctx, ns, want, b.o.finalTimeout)
		run.deployed += deployed - t.have[ns]
		if unfinished != "" {
			run.notes = append(run.notes, fmt.Sprintf("; %s in %s%s", prefix, ns, unfinished))
		}
		err = errors.Join(err, werr)
		t.have[ns] = want
	}
	run.wall = time.Since(t0)
	if sent.ok < n {
		run.notes = append(run.notes, fmt.Sprintf("; %s: sent %s", prefix, sent.note()))
	}
	close(stopB)
	if beside != nil {
		samples := <-bDone
		for _, s := range samples {
			if s.err == nil {
				run.bDeployed++
			}
		}
		*beside = append(*beside, samples...)
	}
	b.logf("  A's burst of %d (%s, beside B: %t) final in %s: %d deployed", n, prefix, beside != nil, run.wall.Round(time.Millisecond), run.deployed)
	return run, err
}

// bEvery installs as B every fairnessEvery until stop, each waited for on its own.
func (t *fairTenants) bEvery(ctx context.Context, prefix string, stop <-chan struct{}) []bSample {
	var mu sync.Mutex
	var wg sync.WaitGroup
	var out []bSample
	tick := time.NewTicker(fairnessEvery)
	defer tick.Stop()
	for i := 0; ; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := t.bInstall(ctx, fmt.Sprintf("%s%d", prefix, i))
			mu.Lock()
			out = append(out, s)
			mu.Unlock()
		}()
		select {
		case <-stop:
			wg.Wait()
			return out
		case <-tick.C:
		}
	}
}

// report adds the section's rows.
func (t *fairTenants) report(r fairRuns) {
	const sec = "fairness"
	b := t.b
	idle201, idleDeployed := medians(r.bAlone)
	floor := max(idleDeployed, time.Second)
	var deployed, to201 []time.Duration
	failed := 0
	for _, s := range r.beside {
		if s.err != nil {
			failed++
			continue
		}
		deployed, to201 = append(deployed, s.toDeployed), append(to201, s.to201)
	}
	slices.Sort(deployed)
	slices.Sort(to201)
	if len(deployed) == 0 {
		b.info(sec, "B beside A's burst", msF(0), fmt.Sprintf("no install of B deployed (%d failed)", failed))
		return
	}
	name := fmt.Sprintf("B every %s beside A's burst of %d, %d clients, 2 namespaces", fairnessEvery, b.o.fairInstalls, b.o.burstClients)
	base := fmt.Sprintf("B alone, p50 (floor 1 s; %s, n=%d)", idleDeployed.Round(time.Millisecond), len(r.bAlone))
	note := fmt.Sprintf("n=%d, %d failed", len(r.beside), failed)
	b.compare(sec, name+": 201 to deployed p50", msF(deployed[len(deployed)/2]), base, msF(floor), "<= 3x", atMost(3), note)
	b.compare(sec, name+": 201 to deployed, worst", msF(deployed[len(deployed)-1]), base, msF(floor), "<= 6x", atMost(6), note)
	b.compare(sec, name+": time-to-201 p50", msF(to201[len(to201)/2]), "B alone p50", msF(idle201), "", nil, note)
	b.compare(sec, name+": time-to-201, worst", msF(to201[len(to201)-1]), "B alone p50", msF(idle201), "", nil, note)
	alone := rateF(float64(r.aAlone.deployed) / r.aAlone.wall.Seconds())
	notes := fmt.Sprintf("%d rounds, alone and beside alternating; beside: %s; alone: %s", fairnessRounds, r.aWithB.note(), r.aAlone.note())
	b.compare(sec, fmt.Sprintf("A's burst of %d beside B: completed installs/s", b.o.fairInstalls),
		rateF(float64(r.aWithB.deployed)/r.aWithB.wall.Seconds()), "A alone", alone, ">= 0.9x", atLeast(0.9), notes)
	b.compare(sec, fmt.Sprintf("A's burst of %d beside B: A's and B's completed installs/s", b.o.fairInstalls),
		rateF(float64(r.aWithB.deployed+r.aWithB.bDeployed)/r.aWithB.wall.Seconds()), "A alone", alone, "", nil,
		fmt.Sprintf("%d of B's deployed beside", r.aWithB.bDeployed))
}

// medians are the median time-to-201 and 201-to-deployed of samples.
func medians(samples []bSample) (to201, toDeployed time.Duration) {
	var a, d []time.Duration
	for _, s := range samples {
		a, d = append(a, s.to201), append(d, s.toDeployed)
	}
	slices.Sort(a)
	slices.Sort(d)
	return a[len(a)/2], d[len(d)/2]
}

// releaseWatch follows the release records of the section's namespaces, one metadata
// watch each: the tenants' waits read it and put no load of their own on the API server
// the stack under measure uses (B's installs polled their Secret every 20 ms each, A's
// bursts listed their namespaces every 100 ms).
type releaseWatch struct {
	mu     sync.Mutex
	status map[string]map[string]string // namespace, Secret: its status label
	// changed is closed and replaced at every change.
	changed chan struct{}
}

func (b *bench) watchReleases(ctx context.Context, namespaces ...string) (*releaseWatch, error) {
	w := &releaseWatch{status: map[string]map[string]string{}, changed: make(chan struct{})}
	for _, ns := range namespaces {
		w.status[ns] = map[string]string{}
		f := metadatainformer.NewFilteredSharedInformerFactory(b.cl.Metadata, 0, ns, func(o *metav1.ListOptions) {
			o.LabelSelector = release.SelectorReleaseSecrets
		})
		inf := f.ForResource(release.SecretsResource).Informer()
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(o any) { w.set(o, false) }, UpdateFunc: func(_, o any) { w.set(o, false) }, DeleteFunc: func(o any) { w.set(o, true) },
		}); err != nil {
			return nil, err
		}
		f.Start(ctx.Done())
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			return nil, fmt.Errorf("the watch of %s's release records did not sync", ns)
		}
	}
	return w, nil
}

// set records o's status, or forgets o (gone).
func (w *releaseWatch) set(o any, gone bool) {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	m, ok := o.(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if byName := w.status[m.Namespace]; byName != nil {
		if gone {
			delete(byName, m.Name)
		} else {
			byName[m.Name] = m.Labels[release.LabelStatus]
		}
	}
	close(w.changed)
	w.changed = make(chan struct{})
}

// errNotInTime is an until whose timeout passed.
var errNotInTime = errors.New("not in time")

// until waits until done (called under the lock) holds, ctx ends or timeout passes.
func (w *releaseWatch) until(ctx context.Context, timeout time.Duration, done func() bool) error {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		w.mu.Lock()
		ok, changed := done(), w.changed
		w.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return errNotInTime
		}
	}
}

// waitDeployed waits until the first revision of release name in ns is final: an error
// when it ends otherwise or timeout passes.
func (w *releaseWatch) waitDeployed(ctx context.Context, ns, name string, timeout time.Duration) error {
	var st string
	err := w.until(ctx, timeout, func() bool {
		st = w.status[ns][release.SecretName(name, 1)]
		return st != "" && !release.IsPending(st)
	})
	switch {
	case errors.Is(err, errNotInTime):
		return fmt.Errorf("%s/%s not deployed after %s", ns, name, timeout)
	case err != nil:
		return err
	case st != "deployed":
		return fmt.Errorf("%s/%s ended %s", ns, name, st)
	}
	return nil
}

// waitBurst waits until ns holds want release revisions none of which is pending, and
// returns how many are deployed; one not final in time is a note ("; NOT FINISHED: ..."),
// not an error that loses the table.
func (t *fairTenants) waitBurst(ctx context.Context, ns string, want int, timeout time.Duration) (int, string, error) {
	var final, deployed int
	err := t.w.until(ctx, timeout, func() bool {
		final, deployed = 0, 0
		for _, st := range t.w.status[ns] {
			if !release.IsPending(st) {
				final++
			}
			if st == "deployed" {
				deployed++
			}
		}
		return final >= want
	})
	if errors.Is(err, errNotInTime) {
		msg := fmt.Sprintf("%d of %d revisions in %s final after %s", final, want, ns, timeout)
		t.b.logf("  %s", msg)
		return deployed, "; NOT FINISHED: " + msg, nil
	}
	return deployed, "", err
}

// editorToken makes ServiceAccount sa in ns with edit there and returns a token of it.
func (b *bench) editorToken(ctx context.Context, ns, sa string) (string, error) {
	if _, err := b.cl.Typed.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	if _, err := b.cl.Typed.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: sa},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}},
	}, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	token, err := satoken.Request(ctx, b.cl.Typed, ns, sa, time.Hour)
	if err != nil {
		return "", err
	}
	return token, b.waitAllowed(ctx, ns, fmt.Sprintf("system:serviceaccount:%s:%s", ns, sa))
}

// forgetConsumed deletes the consumed records and the ledger entries (Leases in
// async-helm's own namespace) of the requests made in namespaces: nothing prunes them once
// the section's stack is stopped, and the shared cluster keeps them otherwise.
func (b *bench) forgetConsumed(namespaces ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	leases := b.cl.Typed.CoordinationV1().Leases(testcluster.OwnNamespace)
	for _, label := range []string{consumed.Label, ledger.Label} {
		list, err := leases.List(ctx, metav1.ListOptions{LabelSelector: label})
		if err != nil {
			b.logf("  %s Leases not deleted: %v", label, err)
			continue
		}
		deleted := 0
		for _, l := range list.Items {
			// The namespace annotation of both (pkg/release/consumed, pkg/ledger).
			if slices.Contains(namespaces, l.Annotations["async-helm.io/namespace"]) {
				if err := leases.Delete(ctx, l.Name, metav1.DeleteOptions{}); err == nil {
					deleted++
				}
			}
		}
		b.logf("  deleted %d %s Leases of %s", deleted, label, strings.Join(namespaces, ", "))
	}
}
