package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/satoken"
	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/release"
)

// fairnessEvery is how often tenant B installs while A's burst drains (issue 43).
const fairnessEvery = 5 * time.Second

// fairnessSection (issue 43): tenant A (the bench's operator, one namespace) sends
// -fair-installs tiny installs from -burst-clients clients through make run's stack
// (default executor slots); tenant B (a ServiceAccount with edit in another namespace)
// installs one tiny release every 5 s while A drains. Beside their floors from the same run:
// B's 201-to-deployed under A's burst against B alone (floor 1 s; targets 3x at the median,
// 6x at the worst), A's completed installs/s with B against A alone (work-conserving:
// >= 0.9x), and B's time-to-201 during the burst against B alone.
func (b *bench) fairnessSection(ctx context.Context) error {
	nsA, st, done, err := b.stackIn(ctx, "fair", stackOptions{})
	if err != nil {
		return err
	}
	defer done()
	nsB, cleanupB, err := b.namespace(ctx, "fairb")
	if err != nil {
		return err
	}
	defer cleanupB()
	tokenB, err := b.editorToken(ctx, nsB, "tenant-b")
	if err != nil {
		return err
	}
	t := &fairTenants{b: b, a: newSubmitClient(st.Submit.URL, b.token, b.o.burstClients+1), bc: newSubmitClient(st.Submit.URL, tokenB, 4),
		nsA: nsA, nsB: nsB, chart: b.charts.ChartURL("tiny", "0.1.0")}
	// Warm-ups: each tenant's first install (chart cache, access reviews, discovery).
	for _, w := range []struct {
		c  *submitClient
		ns string
	}{{t.a, nsA}, {t.bc, nsB}} {
		if err := b.retryNamespace(ctx, func() error { return w.c.install(ctx, t.request(w.ns, "warm")) }); err != nil {
			return fmt.Errorf("warm-up install in %s: %w", w.ns, err)
		}
		if _, err := b.waitFinal(ctx, w.ns, 1, 5*time.Minute); err != nil {
			return err
		}
	}
	alone, err := t.bAlone(ctx, 5)
	if err != nil {
		return err
	}
	aAlone, err := t.aBurst(ctx, "alone", 1, nil)
	if err != nil {
		return err
	}
	b.clearWorkloads(ctx, nsA)
	var beside []bSample
	aWithB, err := t.aBurst(ctx, "beside", 1+b.o.fairInstalls, &beside)
	if err != nil {
		return err
	}
	t.report(alone, beside, aAlone, aWithB)
	return nil
}

// fairTenants are the two tenants of the section: A's and B's clients and namespaces.
type fairTenants struct {
	b        *bench
	a, bc    *submitClient
	nsA, nsB string
	chart    string
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
	s.err = t.b.waitDeployed(ctx, t.nsB, name, 10*time.Minute)
	s.toDeployed = time.Since(t1)
	return s
}

// bAlone is n installs of B one after the other, nothing else running.
func (t *fairTenants) bAlone(ctx context.Context, n int) ([]bSample, error) {
	out := make([]bSample, n)
	for i := range out {
		if out[i] = t.bInstall(ctx, fmt.Sprintf("alone%d", i)); out[i].err != nil {
			return nil, fmt.Errorf("B alone: %w", out[i].err)
		}
	}
	return out, nil
}

// aRun is one burst of A: how many of its installs were deployed and in what time (first
// request to the last final), with a note when it did not finish.
type aRun struct {
	deployed int
	wall     time.Duration
	note     string
}

// aBurst sends A's -fair-installs installs (names prefix<i>) into nsA, which already holds
// have revisions; with beside set, B installs every fairnessEvery until A's are final and
// its samples go there.
func (t *fairTenants) aBurst(ctx context.Context, prefix string, have int, beside *[]bSample) (aRun, error) {
	n, b := t.b.o.fairInstalls, t.b
	stopB, bDone := make(chan struct{}), make(chan []bSample, 1)
	if beside != nil {
		go func() { bDone <- t.bEvery(ctx, prefix, stopB) }()
	}
	t0 := time.Now()
	sent := closedLoop(n, b.o.burstClients, func(i int) error {
		return t.a.install(ctx, t.request(t.nsA, fmt.Sprintf("%s%d", prefix, i)))
	})
	deployed, unfinished, err := b.waitBurst(ctx, t.nsA, have+sent.ok)
	run := aRun{deployed: deployed - have, wall: time.Since(t0), note: fmt.Sprintf("%d of %d deployed; sent %s%s", deployed-have, n, sent.note(), unfinished)}
	close(stopB)
	if beside != nil {
		*beside = <-bDone
	}
	b.logf("  A's burst of %d (%s) final in %s: %s", n, prefix, run.wall.Round(time.Millisecond), run.note)
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
func (t *fairTenants) report(alone, beside []bSample, aAlone, aWithB aRun) {
	const sec = "fairness"
	b := t.b
	idle201, idleDeployed := medians(alone)
	floor := max(idleDeployed, time.Second)
	var deployed, to201 []time.Duration
	failed := 0
	for _, s := range beside {
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
	name := fmt.Sprintf("B every %s beside A's burst of %d, %d clients", fairnessEvery, b.o.fairInstalls, b.o.burstClients)
	base := fmt.Sprintf("B alone, p50 (floor 1 s; %s)", idleDeployed.Round(time.Millisecond))
	note := fmt.Sprintf("n=%d, %d failed", len(beside), failed)
	b.compare(sec, name+": 201 to deployed p50", msF(deployed[len(deployed)/2]), base, msF(floor), "<= 3x", atMost(3), note)
	b.compare(sec, name+": 201 to deployed, worst", msF(deployed[len(deployed)-1]), base, msF(floor), "<= 6x", atMost(6), note)
	b.compare(sec, name+": time-to-201 p50", msF(to201[len(to201)/2]), "B alone p50", msF(idle201), "", nil, note)
	b.compare(sec, name+": time-to-201, worst", msF(to201[len(to201)-1]), "B alone p50", msF(idle201), "", nil, note)
	b.compare(sec, fmt.Sprintf("A's burst of %d beside B: completed installs/s", b.o.fairInstalls),
		rateF(float64(aWithB.deployed)/aWithB.wall.Seconds()), "A alone", rateF(float64(aAlone.deployed)/aAlone.wall.Seconds()),
		">= 0.9x", atLeast(0.9), "beside: "+aWithB.note+"; alone: "+aAlone.note)
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

// waitDeployed polls the first revision of release name in ns until it is deployed (an
// error when it ends otherwise or timeout passes).
func (b *bench) waitDeployed(ctx context.Context, ns, name string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		m, err := b.cl.Metadata.Resource(release.SecretsResource).Namespace(ns).Get(ctx, release.SecretName(name, 1), metav1.GetOptions{})
		if err == nil {
			switch st := m.Labels[release.LabelStatus]; {
			case st == "deployed":
				return nil
			case !release.IsPending(st):
				return fmt.Errorf("%s/%s ended %s", ns, name, st)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s/%s not deployed after %s", ns, name, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
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
